/* The processes of a data-parallel job and the collectives between them:
 * MPI underneath (Open MPI or MPICH, whichever the build found), joined
 * from the launcher's environment (mpirun, mpiexec, srun).
 *
 *     stk_comm *c;
 *     STK_TRY(stk_comm_open(300, &c));            // world 1 without a launcher: no MPI at all
 *     if (stk_comm_world(c) > 1) {
 *         STK_TRY(stk_comm_broadcast(c, weights, bytes, 0));
 *         STK_TRY(stk_comm_allreduce_sum(c, grads, n));
 *     }
 *     stk_comm_close(c);
 *
 * A process started without a launcher is a world of one: every collective
 * is a no-op and MPI is never initialised (no cost, no MPI library needed at
 * run time). A build without MPI refuses a launch of several ranks, saying
 * how to get one. Collectives are called in the same order on every rank.
 *
 * The watchdog: no rank waits forever for another that hung, stopped or
 * died. Joining the job (MPI_Init) and leaving it (MPI_Finalize) are bounded
 * by the timeout given to open: past it the process says so on stderr and
 * exits (status 1), which makes the launcher stop the job. Broadcast,
 * all-gather and barrier fail with STK_ERR_IO past it ("the barrier has not
 * finished after 300 s: another rank has hung, stopped or died"); the
 * caller then stops the job (stk_comm_abort). stk_comm_allreduce_sum blocks
 * (MPI's tuned all-reduce, for gradients on a communication thread): its
 * caller bounds the wait (distributed/ddp.h).
 *
 * Threading: MPI is initialised for serialized use: one thread at a time
 * calls into a communicator (data-parallel training's communication thread
 * while backward runs, the main thread otherwise).
 */
#pragma once

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_comm stk_comm;

/* How many ranks the launcher started, this one's rank and its rank among
 * the ranks on this machine (the GPU to use), from the environment of
 * Open MPI, MPICH/Hydra, PMIx or Slurm; 1, 0, 0 without a launcher. */
typedef struct stk_launch {
    int world, rank, local_rank;
    const char *launcher; /* "mpirun (Open MPI)", "srun", ...; NULL without one */
} stk_launch;
stk_launch stk_launch_detect(void);

/* Join the job (MPI_Init_thread when world > 1), with the watchdog's
 * timeout in seconds (<= 0: 300). Errors: UNSUPPORTED (several ranks and a
 * build without MPI), STK_ERR_IO (MPI failed to start, with its message),
 * NOMEM. */
stk_status stk_comm_open(double timeout_s, stk_comm **out);
/* Leave the job (MPI_Finalize). NULL is a no-op. */
void stk_comm_close(stk_comm *c);

int stk_comm_rank(const stk_comm *c);
int stk_comm_world(const stk_comm *c);
int stk_comm_local_rank(const stk_comm *c);
/* "Open MPI v4.1.4", "MPICH ...", or "none" (world of one). */
const char *stk_comm_library(const stk_comm *c);

/* Collectives; each names the operation and the MPI error on failure, or
 * the watchdog's timeout (STK_ERR_IO). */
stk_status stk_comm_broadcast(stk_comm *c, void *buf, size_t bytes, int root);
/* In place: buf[i] = the sum of buf[i] over the ranks. */
stk_status stk_comm_allreduce_sum(stk_comm *c, float *buf, size_t n);
/* all[r * bytes .. ] = rank r's `mine` (all: world * bytes). */
stk_status stk_comm_allgather(stk_comm *c, const void *mine, size_t bytes, void *all);
/* timeout_s > 0: this wait's own bound (a rank waiting for rank 0's
 * evaluation); <= 0: the watchdog's. */
stk_status stk_comm_barrier(stk_comm *c, double timeout_s);

/* Point to point (pipeline stages on ranks): `bytes` to rank `to` with
 * `tag`, and from rank `from` with the same tag (the sizes must match).
 * A send only starts (*req; buf must stay as it is until stk_comm_wait
 * returns): two ranks sending each other large messages before either
 * receives would otherwise wait for each other forever. The receive and
 * the wait are under the watchdog. Errors: INVALID_ARG (no such rank, a tag
 * outside 0..32767, a message of another size), IO (MPI, the timeout). */
typedef struct stk_comm_request stk_comm_request;
stk_status stk_comm_isend(stk_comm *c, int to, int tag, const void *buf, size_t bytes,
                          stk_comm_request **req);
/* Wait for a send to finish and free *req (also on error). */
stk_status stk_comm_wait(stk_comm *c, stk_comm_request *req);
stk_status stk_comm_recv(stk_comm *c, int from, int tag, void *buf, size_t bytes);

/* A rank that cannot go on stops every rank of the job now (MPI_Abort with
 * `code`) instead of leaving them waiting in a collective. Returns only in a
 * world of one (then it does nothing). */
void stk_comm_abort(stk_comm *c, int code);

#ifdef __cplusplus
}
#endif
