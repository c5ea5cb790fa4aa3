/* comm.h over MPI (Open MPI or MPICH). */
#include "dist/comm.h"

#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct stk_comm {
    stk_launch launch;
    bool mpi; /* MPI_Init_thread was called (world > 1) */
    char library[MPI_MAX_LIBRARY_VERSION_STRING];
};

/* MPI's message for `rc`, as an error naming the operation. */
static stk_status mpi_error(int rc, const char *op)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    return stk_error(STK_ERR_IO, "MPI %s failed: %s", op, len ? text : "unknown error");
}

stk_status stk_comm_open(stk_comm **out)
{
    *out = NULL;
    stk_comm *c = calloc(1, sizeof *c);
    if (!c) return stk_error(STK_ERR_NOMEM, "out of memory");
    c->launch = stk_launch_detect();
    snprintf(c->library, sizeof c->library, "none");
    if (c->launch.world > 1) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            free(c);
            return mpi_error(rc, "init");
        }
        c->mpi = true;
        /* errors come back as codes, never abort the job behind our back */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rank = 0, world = 0, len = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &world);
        if (provided < MPI_THREAD_SERIALIZED || rank != c->launch.rank ||
            world != c->launch.world) {
            stk_status st =
                stk_error(STK_ERR_UNSUPPORTED,
                          provided < MPI_THREAD_SERIALIZED
                              ? "MPI gives thread level %d; data-parallel training needs "
                                "MPI_THREAD_SERIALIZED"
                              : "MPI says rank %d of %d, the launcher's environment rank %d of %d",
                          provided < MPI_THREAD_SERIALIZED ? provided : rank, world, c->launch.rank,
                          c->launch.world);
            MPI_Finalize();
            free(c);
            return st;
        }
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        MPI_Get_library_version(v, &len);
        v[strcspn(v, ",\n")] = '\0'; /* the first line: "Open MPI v4.1.4" */
        snprintf(c->library, sizeof c->library, "%s", v);
    }
    *out = c;
    return STK_OK;
}

void stk_comm_close(stk_comm *c)
{
    if (!c) return;
    if (c->mpi) MPI_Finalize();
    free(c);
}

int stk_comm_rank(const stk_comm *c) { return c->launch.rank; }
int stk_comm_world(const stk_comm *c) { return c->launch.world; }
int stk_comm_local_rank(const stk_comm *c) { return c->launch.local_rank; }
const char *stk_comm_library(const stk_comm *c) { return c->library; }

/* MPI counts are ints: large buffers go in pieces of at most 2^30 elements. */
#define PIECE ((size_t)1 << 30)

stk_status stk_comm_broadcast(stk_comm *c, void *buf, size_t bytes, int root)
{
    if (root < 0 || root >= c->launch.world)
        return stk_error(STK_ERR_INVALID_ARG, "broadcast: no rank %d", root);
    if (!c->mpi) return STK_OK;
    for (size_t off = 0; off < bytes; off += PIECE) {
        size_t n = bytes - off < PIECE ? bytes - off : PIECE;
        int rc = MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_error(rc, "broadcast");
    }
    return STK_OK;
}

stk_status stk_comm_allreduce_sum(stk_comm *c, float *buf, size_t n)
{
    if (!c->mpi) return STK_OK;
    for (size_t off = 0; off < n; off += PIECE) {
        size_t k = n - off < PIECE ? n - off : PIECE;
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_error(rc, "all-reduce");
    }
    return STK_OK;
}

stk_status stk_comm_allgather(stk_comm *c, const void *mine, size_t bytes, void *all)
{
    if (!c->mpi) {
        memmove(all, mine, bytes);
        return STK_OK;
    }
    if (bytes > INT_MAX) return stk_error(STK_ERR_INVALID_ARG, "all-gather: %zu bytes", bytes);
    int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? STK_OK : mpi_error(rc, "all-gather");
}

stk_status stk_comm_barrier(stk_comm *c)
{
    if (!c->mpi) return STK_OK;
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? STK_OK : mpi_error(rc, "barrier");
}

void stk_comm_abort(stk_comm *c, int code)
{
    if (c && c->mpi) MPI_Abort(MPI_COMM_WORLD, code);
}
