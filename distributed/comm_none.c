/* comm.h without MPI: a world of one; a launch of several ranks is refused. */
#include "distributed/comm.h"

#include <stdlib.h>
#include <string.h>

struct stk_comm {
    int unused;
};

stk_status stk_comm_open(double timeout_s, stk_comm **out)
{
    (void)timeout_s;
    *out = NULL;
    stk_launch l = stk_launch_detect();
    if (l.world > 1)
        return stk_error(STK_ERR_UNSUPPORTED,
                         "%s started %d ranks, but this build of Stoke has no MPI: install "
                         "libopenmpi-dev (or MPICH) and rebuild to train on several processes",
                         l.launcher, l.world);
    if (!(*out = calloc(1, sizeof **out))) return stk_error(STK_ERR_NOMEM, "out of memory");
    return STK_OK;
}

void stk_comm_close(stk_comm *c) { free(c); }
int stk_comm_rank(const stk_comm *c) { return (void)c, 0; }
int stk_comm_world(const stk_comm *c) { return (void)c, 1; }
int stk_comm_local_rank(const stk_comm *c) { return (void)c, 0; }
const char *stk_comm_library(const stk_comm *c) { return (void)c, "none"; }

stk_status stk_comm_broadcast(stk_comm *c, void *buf, size_t bytes, int root)
{
    (void)c, (void)buf, (void)bytes;
    return root == 0 ? STK_OK : stk_error(STK_ERR_INVALID_ARG, "broadcast: no rank %d", root);
}

stk_status stk_comm_allreduce_sum(stk_comm *c, float *buf, size_t n)
{
    (void)c, (void)buf, (void)n;
    return STK_OK;
}

stk_status stk_comm_allgather(stk_comm *c, const void *mine, size_t bytes, void *all)
{
    (void)c;
    memmove(all, mine, bytes);
    return STK_OK;
}

stk_status stk_comm_barrier(stk_comm *c, double timeout_s)
{
    return (void)c, (void)timeout_s, STK_OK;
}

stk_status stk_comm_isend(stk_comm *c, int to, int tag, const void *buf, size_t bytes,
                          stk_comm_request **req)
{
    (void)c, (void)tag, (void)buf, (void)bytes;
    *req = NULL;
    return stk_error(STK_ERR_INVALID_ARG, "send to rank %d: a world of one", to);
}

stk_status stk_comm_wait(stk_comm *c, stk_comm_request *req)
{
    (void)c, (void)req;
    return STK_OK;
}

stk_status stk_comm_recv(stk_comm *c, int from, int tag, void *buf, size_t bytes)
{
    (void)c, (void)tag, (void)buf, (void)bytes;
    return stk_error(STK_ERR_INVALID_ARG, "receive from rank %d: a world of one", from);
}

void stk_comm_abort(stk_comm *c, int code) { (void)c, (void)code; }
