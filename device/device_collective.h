/* Collectives on device memory between the processes of a job: NCCL on
 * GPUs, its communicator set up by the caller's own transport (the 128-byte
 * id made on rank 0 travels through MPI), its work ordered with the
 * engine's compute stream.
 *
 *     uint8_t id[STK_DEVICE_COMM_ID_BYTES];
 *     if (rank == 0) STK_TRY(stk_device_comm_make_id(id));
 *     STK_TRY(stk_comm_broadcast(comm, id, sizeof id, 0));       // any transport
 *     stk_device_comm *dc;
 *     STK_TRY(stk_device_comm_open(id, rank, world, &dc));       // every rank
 *     STK_TRY(stk_device_comm_copy(dc, bucket + off, grad, bytes));  // on the compute stream
 *     STK_TRY(stk_device_comm_allreduce_avg(dc, bucket, n));     // on the comm stream, after it
 *     ... more backward on the compute stream, overlapping ...
 *     STK_TRY(stk_device_comm_finish(dc, 300));                  // compute waits; the host too,
 * bounded stk_device_comm_close(dc);
 *
 * Streams: an all-reduce starts on the communication stream once the work
 * queued on the compute stream before it has run (an event), so backward
 * goes on while it runs; finish makes the compute stream wait for every
 * queued all-reduce, and waits on the host for them with a deadline: a
 * peer that hung or died would otherwise leave the GPU waiting forever. On
 * the deadline the communicator is aborted (ncclCommAbort) and the error
 * says so; the job must then stop.
 *
 * Builds without CUDA or without NCCL: stk_device_comm_library() is NULL
 * and the rest return STK_ERR_UNSUPPORTED. The STOKE_CUDA=EMULATE build
 * runs tests/cuda_host's NCCL (processes joined through shared memory).
 * One thread at a time per communicator.
 */
#pragma once

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STK_DEVICE_COMM_ID_BYTES 128

typedef struct stk_device_comm stk_device_comm;

/* "NCCL 2.28.9", or NULL in a build without it. */
const char *stk_device_comm_library(void);

/* The job's id, made by one rank (ncclGetUniqueId). */
stk_status stk_device_comm_make_id(uint8_t id[STK_DEVICE_COMM_ID_BYTES]);
/* Join: every rank with the same id (blocks until all have joined). The
 * device is the one the CUDA context uses. Errors: STK_ERR_CUDA. */
stk_status stk_device_comm_open(const uint8_t id[STK_DEVICE_COMM_ID_BYTES], int rank, int world,
                                stk_device_comm **out);
/* Device-to-device copy queued on the compute stream. */
stk_status stk_device_comm_copy(stk_device_comm *c, void *dst, const void *src, size_t bytes);
/* Queue buf[i] = the mean of buf[i] over the ranks (n floats, in place). */
stk_status stk_device_comm_allreduce_avg(stk_device_comm *c, float *buf, size_t n);
/* See above. Errors: STK_ERR_IO (not finished within timeout_s: aborted),
 * STK_ERR_CUDA (NCCL or CUDA failed). */
stk_status stk_device_comm_finish(stk_device_comm *c, double timeout_s);
/* Seconds the communication stream spent in all-reduces since open (from
 * events; 0 in builds without timing). */
double stk_device_comm_seconds(const stk_device_comm *c);
/* NULL is a no-op. */
void stk_device_comm_close(stk_device_comm *c);

#ifdef __cplusplus
}
#endif
