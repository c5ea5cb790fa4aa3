/* Device collectives on NCCL: device/device_collective.h's functions inside the
 * CUDA backend module (the host reaches them through its table). */
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_device.h"

#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One queued all-reduce: its events on the communication stream. */
typedef struct reduce_events {
    cudaEvent_t start, done;
} reduce_events;

struct stk_device_comm {
    ncclComm_t nccl;
    stk_cuda_ctx *cx;
    cudaStream_t stream;      /* the communication stream */
    cudaEvent_t ready;        /* compute work before an all-reduce */
    reduce_events *ev;        /* this step's all-reduces */
    int n_ev, cap_ev, queued; /* events made, capacity, queued since the last finish */
    double seconds;
    bool aborted;
};

static stk_status nccl_check(ncclResult_t r, const char *what)
{
    if (r == ncclSuccess) return STK_OK;
    return stk_error(STK_ERR_CUDA, "NCCL %s: %s", what, ncclGetErrorString(r));
}

const char *stk_nccl_library(void)
{
    static char name[32];
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return "NCCL";
    /* NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch */
    snprintf(name, sizeof name, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    return name;
}

stk_status stk_nccl_make_id(uint8_t id[STK_DEVICE_COMM_ID_BYTES])
{
    ncclUniqueId u;
    STK_TRY(nccl_check(ncclGetUniqueId(&u), "ncclGetUniqueId"));
    memcpy(id, u.internal, STK_DEVICE_COMM_ID_BYTES);
    return STK_OK;
}

stk_status stk_nccl_open(const uint8_t id[STK_DEVICE_COMM_ID_BYTES], int rank, int world,
                         stk_device_comm **out)
{
    *out = NULL;
    stk_device_comm *c = calloc(1, sizeof *c);
    if (!c) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = stk_cuda_context(&c->cx);
    if (st == STK_OK)
        st = stk_cuda_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                            "creating the communication stream");
    if (st == STK_OK)
        st = stk_cuda_check(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming),
                            "creating an event");
    if (st == STK_OK) {
        ncclUniqueId u;
        memcpy(u.internal, id, STK_DEVICE_COMM_ID_BYTES);
        st = nccl_check(ncclCommInitRank(&c->nccl, world, u, rank), "ncclCommInitRank");
    }
    if (st != STK_OK) {
        stk_nccl_close(c);
        return st;
    }
    *out = c;
    return STK_OK;
}

stk_status stk_nccl_copy(stk_device_comm *c, void *dst, const void *src, size_t bytes)
{
    return stk_cuda_check(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->cx->compute),
        "copying a gradient into its bucket");
}

stk_status stk_nccl_allreduce_avg(stk_device_comm *c, float *buf, size_t n)
{
    if (c->aborted) return stk_error(STK_ERR_IO, "the NCCL communicator was aborted");
    if (c->queued == c->n_ev) { /* one more pair of events, kept for later steps */
        if (c->n_ev == c->cap_ev) {
            int cap = c->cap_ev ? 2 * c->cap_ev : 8;
            reduce_events *ev = realloc(c->ev, (size_t)cap * sizeof *ev);
            if (!ev) return stk_error(STK_ERR_NOMEM, "out of memory");
            c->ev = ev;
            c->cap_ev = cap;
        }
        reduce_events *e = &c->ev[c->n_ev];
        STK_TRY(stk_cuda_check(cudaEventCreate(&e->start), "creating an event"));
        stk_status st = stk_cuda_check(cudaEventCreate(&e->done), "creating an event");
        if (st != STK_OK) {
            cudaEventDestroy(e->start);
            return st;
        }
        c->n_ev++;
    }
    reduce_events *e = &c->ev[c->queued];
    /* the gradients copied into buf on the compute stream come first */
    STK_TRY(stk_cuda_check(cudaEventRecord(c->ready, c->cx->compute), "recording an event"));
    STK_TRY(stk_cuda_check(cudaStreamWaitEvent(c->stream, c->ready, 0), "ordering the streams"));
    STK_TRY(stk_cuda_check(cudaEventRecord(e->start, c->stream), "recording an event"));
    STK_TRY(nccl_check(ncclAllReduce(buf, buf, n, ncclFloat32, ncclAvg, c->nccl, c->stream),
                       "ncclAllReduce"));
    STK_TRY(stk_cuda_check(cudaEventRecord(e->done, c->stream), "recording an event"));
    c->queued++;
    return STK_OK;
}

static double now_sec(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

stk_status stk_nccl_finish(stk_device_comm *c, double timeout_s)
{
    if (c->queued == 0) return STK_OK;
    cudaEvent_t last = c->ev[c->queued - 1].done;
    /* the compute stream waits on the device: the averaged gradients come
     * before the optimizer's kernels */
    STK_TRY(stk_cuda_check(cudaStreamWaitEvent(c->cx->compute, last, 0), "ordering the streams"));
    /* and the host, with a deadline, polling NCCL for asynchronous errors
     * (a peer gone) as PyTorch's watchdog does */
    double deadline = now_sec() + timeout_s;
    useconds_t nap = 20;
    for (;;) {
        cudaError_t q = cudaEventQuery(last);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) return stk_cuda_check(q, "waiting for the all-reduce");
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(c->nccl, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
            ncclCommAbort(c->nccl);
            c->nccl = NULL;
            c->aborted = true;
            return nccl_check(async, "all-reduce");
        }
        if (now_sec() > deadline) {
            ncclCommAbort(c->nccl);
            c->nccl = NULL;
            c->aborted = true;
            return stk_error(STK_ERR_IO,
                             "the NCCL all-reduce has not finished after %.0f s (communicator "
                             "aborted)",
                             timeout_s);
        }
        usleep(nap);
        if (nap < 1000) nap *= 2;
    }
    for (int k = 0; k < c->queued; k++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, c->ev[k].start, c->ev[k].done) == cudaSuccess)
            c->seconds += ms * 1e-3;
    }
    c->queued = 0;
    return STK_OK;
}

double stk_nccl_seconds(const stk_device_comm *c) { return c->seconds; }

void stk_nccl_close(stk_device_comm *c)
{
    if (!c) return;
    if (c->nccl) {
        if (c->queued) /* unfinished work: do not wait for it */
            ncclCommAbort(c->nccl);
        else
            ncclCommDestroy(c->nccl);
    }
    if (!c->aborted && !c->queued) {
        for (int k = 0; k < c->n_ev; k++) {
            cudaEventDestroy(c->ev[k].start);
            cudaEventDestroy(c->ev[k].done);
        }
        if (c->ready) cudaEventDestroy(c->ready);
        if (c->stream) cudaStreamDestroy(c->stream);
    } /* else: work may still hold them; leaked on purpose, the job is ending */
    free(c->ev);
    free(c);
}
