/* comm.h over MPI (Open MPI or MPICH). */
#include "distributed/comm.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct stk_comm {
    stk_launch launch;
    bool mpi;         /* MPI_Init_thread was called (world > 1) */
    double timeout_s; /* the watchdog */
    char library[MPI_MAX_LIBRARY_VERSION_STRING];
};

static double now_sec(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the watchdog of MPI_Init and MPI_Finalize -------------------------------
 * Both wait for every rank (the launcher's fence) and cannot be cancelled:
 * a thread waits beside them and, past the deadline, says why and exits the
 * process, which makes the launcher stop the job. */

typedef struct guard {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool done, started;
    double seconds;
    const stk_comm *c;
    const char *what;
} guard;

static void *guard_main(void *p)
{
    guard *g = p;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += (time_t)g->seconds;
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    while (!g->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g->cv, &g->lock, &t);
    bool late = !g->done;
    pthread_mutex_unlock(&g->lock);
    if (late) {
        fprintf(stderr,
                "stoke: rank %d of %d: %s has not finished after %.0f s: another rank has hung, "
                "stopped or died (its own output may say why); stopping the job\n",
                g->c->launch.rank, g->c->launch.world, g->what, g->seconds);
        fflush(stderr);
        _exit(1);
    }
    return NULL;
}

static void guard_start(guard *g, const stk_comm *c, const char *what)
{
    *g = (guard){.seconds = c->timeout_s, .c = c, .what = what};
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cv, NULL);
    /* without the thread the wait is unguarded, as before: nothing else to do */
    g->started = pthread_create(&g->thread, NULL, guard_main, g) == 0;
}

static void guard_stop(guard *g)
{
    pthread_mutex_lock(&g->lock);
    g->done = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->lock);
    if (g->started) pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->lock);
}

/* MPI's message for `rc`, as an error naming the operation. */
static stk_status mpi_error(int rc, const char *op)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    return stk_error(STK_ERR_IO, "MPI %s failed: %s", op, len ? text : "unknown error");
}

stk_status stk_comm_open(double timeout_s, stk_comm **out)
{
    *out = NULL;
    stk_comm *c = calloc(1, sizeof *c);
    if (!c) return stk_error(STK_ERR_NOMEM, "out of memory");
    c->launch = stk_launch_detect();
    c->timeout_s = timeout_s > 0 ? timeout_s : 300;
    snprintf(c->library, sizeof c->library, "none");
    if (c->launch.world > 1) {
        int provided = 0;
        guard g;
        guard_start(&g, c, "starting MPI");
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        guard_stop(&g);
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
            stk_comm_close(c);
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
    if (c->mpi) {
        guard g;
        guard_start(&g, c, "leaving MPI (MPI_Finalize)");
        MPI_Finalize();
        guard_stop(&g);
    }
    free(c);
}

int stk_comm_rank(const stk_comm *c) { return c->launch.rank; }
int stk_comm_world(const stk_comm *c) { return c->launch.world; }
int stk_comm_local_rank(const stk_comm *c) { return c->launch.local_rank; }
const char *stk_comm_library(const stk_comm *c) { return c->library; }

/* MPI counts are ints: large buffers go in pieces of at most 2^30 elements. */
#define PIECE ((size_t)1 << 30)

/* Wait for a non-blocking collective, at most the watchdog's timeout (or
 * `seconds` when > 0). MPI progresses it inside MPI_Test: poll, first
 * spinning, then every 100 us. */
static stk_status wait_for(stk_comm *c, MPI_Request *req, const char *op, double seconds)
{
    double limit = seconds > 0 ? seconds : c->timeout_s, t0 = now_sec();
    for (long spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_error(rc, op);
        if (done) return STK_OK;
        if (now_sec() - t0 > limit) /* the request stays pending: the caller stops the job */
            return stk_error(STK_ERR_IO,
                             "the %s has not finished after %.0f s: another rank has hung, "
                             "stopped or died (its own output may say why); stopping the job",
                             op, limit);
        if (spins > 1000) nanosleep(&(struct timespec){0, 100000}, NULL);
    }
}

stk_status stk_comm_broadcast(stk_comm *c, void *buf, size_t bytes, int root)
{
    if (root < 0 || root >= c->launch.world)
        return stk_error(STK_ERR_INVALID_ARG, "broadcast: no rank %d", root);
    if (!c->mpi) return STK_OK;
    for (size_t off = 0; off < bytes; off += PIECE) {
        size_t n = bytes - off < PIECE ? bytes - off : PIECE;
        MPI_Request req;
        int rc = MPI_Ibcast((char *)buf + off, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS) return mpi_error(rc, "broadcast");
        STK_TRY(wait_for(c, &req, "broadcast", 0));
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
    MPI_Request req;
    int rc =
        MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &req);
    return rc == MPI_SUCCESS ? wait_for(c, &req, "all-gather", 0) : mpi_error(rc, "all-gather");
}

stk_status stk_comm_barrier(stk_comm *c, double timeout_s)
{
    if (!c->mpi) return STK_OK;
    MPI_Request req;
    int rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
    return rc == MPI_SUCCESS ? wait_for(c, &req, "barrier", timeout_s) : mpi_error(rc, "barrier");
}

static stk_status p2p_check(const stk_comm *c, int peer, int tag, size_t bytes, const char *op)
{
    if (peer < 0 || peer >= c->launch.world || peer == c->launch.rank || tag < 0 || tag > 32767 ||
        bytes > INT_MAX)
        return stk_error(STK_ERR_INVALID_ARG, "%s: rank %d, tag %d, %zu bytes", op, peer, tag,
                         bytes);
    return c->mpi ? STK_OK : stk_error(STK_ERR_INVALID_ARG, "%s: a world of one", op);
}

struct stk_comm_request {
    MPI_Request req;
};

stk_status stk_comm_isend(stk_comm *c, int to, int tag, const void *buf, size_t bytes,
                          stk_comm_request **out)
{
    *out = NULL;
    STK_TRY(p2p_check(c, to, tag, bytes, "send"));
    stk_comm_request *r = malloc(sizeof *r);
    if (!r) return stk_error(STK_ERR_NOMEM, "out of memory");
    int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, to, tag, MPI_COMM_WORLD, &r->req);
    if (rc != MPI_SUCCESS) {
        free(r);
        return mpi_error(rc, "send");
    }
    *out = r;
    return STK_OK;
}

stk_status stk_comm_wait(stk_comm *c, stk_comm_request *r)
{
    if (!r) return STK_OK;
    stk_status st = wait_for(c, &r->req, "send", 0);
    free(r);
    return st;
}

stk_status stk_comm_recv(stk_comm *c, int from, int tag, void *buf, size_t bytes)
{
    STK_TRY(p2p_check(c, from, tag, bytes, "receive"));
    MPI_Request req;
    MPI_Status status;
    int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, from, tag, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "receive");
    double t0 = now_sec();
    for (long spins = 0;; spins++) { /* wait_for, keeping the status for the size */
        int done = 0;
        if ((rc = MPI_Test(&req, &done, &status)) != MPI_SUCCESS) return mpi_error(rc, "receive");
        if (done) break;
        if (now_sec() - t0 > c->timeout_s)
            return stk_error(STK_ERR_IO,
                             "the receive from rank %d has not finished after %.0f s: it has "
                             "hung, stopped or died (its own output may say why); stopping the "
                             "job",
                             from, c->timeout_s);
        if (spins > 1000) nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if ((size_t)got != bytes)
        return stk_error(STK_ERR_INVALID_ARG, "receive from rank %d: %d bytes, expected %zu", from,
                         got, bytes);
    return STK_OK;
}

void stk_comm_abort(stk_comm *c, int code)
{
    if (c && c->mpi) MPI_Abort(MPI_COMM_WORLD, code);
}
