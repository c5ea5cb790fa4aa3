/* The tests' host implementation of the NCCL calls Stoke makes
 * (kernels/cuda/collective_nccl.c), between real processes: the unique id
 * names a POSIX shared-memory segment that every rank maps; an all-reduce
 * runs on its stream's worker thread (like NCCL's kernel on its stream),
 * each rank copying its part into its slot, a barrier, every rank summing
 * the slots in rank order (so all get the same bits), a barrier. The
 * barrier is lock-free (atomic counters in the segment, waiters polling):
 * a peer stopped at any instruction (SIGSTOP, a hang) can never hold
 * something another rank needs, so the others' ncclCommAbort always returns
 * and their waits see the abort flag. A process-shared mutex here once
 * deadlocked the watchdog test when a peer was stopped while holding it. */
#include "host_cuda.h"

#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHUNK ((size_t)1 << 18) /* floats per rank per round */

typedef struct shared {
    atomic_int ready; /* rank 0 has initialised the rest */
    int world;
    atomic_int arrived;
    atomic_uint generation;
    atomic_int aborted;
    float data[]; /* world * CHUNK */
} shared;

struct ncclComm {
    shared *sh;
    size_t bytes;
    int rank, world;
    atomic_int local_abort;
    atomic_int async_error; /* ncclResult_t */
};

static size_t segment_bytes(int world)
{
    return sizeof(shared) + (size_t)world * CHUNK * sizeof(float);
}

ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error (a peer may have aborted)";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static atomic_int counter;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    memset(id->internal, 0, sizeof id->internal);
    snprintf(id->internal, sizeof id->internal, "/stoke-host-nccl-%d-%d-%ld", (int)getpid(),
             atomic_fetch_add(&counter, 1), t.tv_nsec);
    return ncclSuccess;
}

/* Wait until every rank has arrived; false when aborted (here or by a peer).
 * The generation is read before arriving, and the last rank to arrive
 * resets the count before it opens the next generation. */
static bool barrier(struct ncclComm *c)
{
    shared *sh = c->sh;
    unsigned gen = atomic_load(&sh->generation);
    if (atomic_fetch_add(&sh->arrived, 1) + 1 == sh->world) {
        atomic_store(&sh->arrived, 0);
        atomic_fetch_add(&sh->generation, 1);
        return true;
    }
    for (unsigned spins = 0; atomic_load(&sh->generation) == gen; spins++) {
        if (atomic_load(&c->local_abort)) atomic_store(&sh->aborted, 1);
        if (atomic_load(&sh->aborted)) return false;
        if (spins < 64)
            sched_yield();
        else
            usleep(50);
    }
    return true;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        stk_host_cuda_misuse("ncclCommInitRank: rank %d of %d", rank, nranks);
        return ncclInvalidArgument;
    }
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    c->rank = rank;
    c->world = nranks;
    c->bytes = segment_bytes(nranks);
    int fd = -1;
    if (rank == 0) {
        fd = shm_open(id.internal, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0 && ftruncate(fd, (off_t)c->bytes) != 0) {
            close(fd);
            fd = -1;
        }
    } else { /* rank 0 may not have made it yet */
        for (int tries = 0; fd < 0 && tries < 120 * 100; tries++) {
            fd = shm_open(id.internal, O_RDWR, 0600);
            if (fd < 0) usleep(10 * 1000);
        }
    }
    if (fd < 0) {
        fprintf(stderr, "host NCCL: shared memory %s: %s\n", id.internal, strerror(errno));
        free(c);
        return ncclSystemError;
    }
    c->sh = mmap(NULL, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->sh == MAP_FAILED) {
        free(c);
        return ncclSystemError;
    }
    if (rank == 0) { /* ftruncate zeroed the counters */
        c->sh->world = nranks;
        atomic_store(&c->sh->ready, 1);
    } else {
        while (!atomic_load(&c->sh->ready)) usleep(1000);
    }
    bool joined = barrier(c); /* every rank has mapped the segment */
    if (rank == 0) shm_unlink(id.internal);
    if (!joined) {
        munmap(c->sh, c->bytes);
        free(c);
        return ncclSystemError;
    }
    *out = c;
    return ncclSuccess;
}

typedef struct reduce_job {
    struct ncclComm *c;
    const float *send;
    float *recv;
    size_t count;
    bool average;
} reduce_job;

static void run_allreduce(void *arg)
{
    reduce_job *j = arg;
    struct ncclComm *c = j->c;
    float *mine = c->sh->data + (size_t)c->rank * CHUNK;
    for (size_t off = 0; off < j->count && !atomic_load(&c->async_error); off += CHUNK) {
        size_t k = j->count - off < CHUNK ? j->count - off : CHUNK;
        memcpy(mine, j->send + off, k * sizeof(float));
        if (!barrier(c)) {
            atomic_store(&c->async_error, ncclRemoteError);
            break;
        }
        for (size_t i = 0; i < k; i++) {
            float s = 0;
            for (int r = 0; r < c->world; r++) s += c->sh->data[(size_t)r * CHUNK + i];
            j->recv[off + i] = j->average ? s / (float)c->world : s;
        }
        if (!barrier(c)) { /* the slots are free again */
            atomic_store(&c->async_error, ncclRemoteError);
            break;
        }
    }
    free(j);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    if (datatype != ncclFloat32 || (op != ncclSum && op != ncclAvg)) {
        stk_host_cuda_misuse("ncclAllReduce: only float32 sum/avg are emulated");
        return ncclInvalidArgument;
    }
    if (!stk_host_cuda_is_device(sendbuff, count * sizeof(float)) ||
        !stk_host_cuda_is_device(recvbuff, count * sizeof(float))) {
        stk_host_cuda_misuse("ncclAllReduce: buffers of %zu floats are not device memory", count);
        return ncclInvalidArgument;
    }
    if (atomic_load(&comm->async_error)) return ncclInvalidUsage;
    reduce_job *j = malloc(sizeof *j);
    if (!j) return ncclSystemError;
    *j = (reduce_job){comm, sendbuff, recvbuff, count, op == ncclAvg};
    stk_host_cuda_submit(stream, run_allreduce, j);
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    *asyncError = (ncclResult_t)atomic_load(&comm->async_error);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    /* a job still queued or waiting sees the flag and gives up; the memory
     * stays mapped (it may still be running): the process is ending */
    atomic_store(&comm->local_abort, 1);
    atomic_store(&comm->sh->aborted, 1);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    munmap(comm->sh, comm->bytes);
    free(comm);
    return ncclSuccess;
}
