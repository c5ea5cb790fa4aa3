/* Pipeline stages on ranks (pipe_ranks.h). */
#include "distributed/pipe_ranks.h"

#include <math.h>
#include <stdlib.h>

struct stk_pipe_ranks {
    stk_comm *comm;
    int rank, stages, replicas;
    stk_pipe_link link;
    /* for the buffers' average */
    stk_trainer *trainer;
    stk_model *model;
    stk_ddp *ddp;
};

/* The stages of this rank's pipeline are the ranks replica * K .. replica * K + K - 1. */
static int rank_of(const stk_pipe_ranks *p, int stage) { return p->rank - p->link.stage + stage; }

static stk_status link_send(void *ctx, int stage, int tag, const void *buf, size_t bytes,
                            void **pending)
{
    stk_pipe_ranks *p = ctx;
    return stk_comm_isend(p->comm, rank_of(p, stage), tag, buf, bytes,
                          (stk_comm_request **)pending);
}

static stk_status link_wait(void *ctx, void *pending)
{
    return stk_comm_wait(((stk_pipe_ranks *)ctx)->comm, pending);
}

static stk_status link_recv(void *ctx, int stage, int tag, void *buf, size_t bytes)
{
    stk_pipe_ranks *p = ctx;
    return stk_comm_recv(p->comm, rank_of(p, stage), tag, buf, bytes);
}

stk_status stk_pipe_ranks_open(stk_comm *comm, int stages, stk_pipe_ranks **out)
{
    *out = NULL;
    int world = stk_comm_world(comm);
    if (stages < 1 || world % stages)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--pipeline %d on %d ranks: the ranks must be a multiple of the stages "
                         "(K x replicas)",
                         stages, world);
    stk_pipe_ranks *p = calloc(1, sizeof *p);
    if (!p) return stk_error(STK_ERR_NOMEM, "out of memory");
    p->comm = comm;
    p->rank = stk_comm_rank(comm);
    p->stages = stages;
    p->replicas = world / stages;
    p->link = (stk_pipe_link){.stage = p->rank % stages,
                              .ctx = p,
                              .send = link_send,
                              .wait = link_wait,
                              .recv = link_recv};
    *out = p;
    return STK_OK;
}

int stk_pipe_ranks_stage(const stk_pipe_ranks *p) { return p->link.stage; }
int stk_pipe_ranks_replica(const stk_pipe_ranks *p) { return p->rank / p->stages; }
int stk_pipe_ranks_replicas(const stk_pipe_ranks *p) { return p->replicas; }
const stk_pipe_link *stk_pipe_ranks_link(const stk_pipe_ranks *p) { return &p->link; }

/* After each step: every rank holds the whole model (the gradients'
 * all-reduce gave every parameter to all), but only a stage's ranks ran its
 * batch norm: its running statistics and counters go to every rank,
 * averaged over the replicas (the other ranks contribute zeros). */
static stk_status average_buffers(void *ctx, const stk_step_info *info)
{
    stk_pipe_ranks *p = ctx;
    const stk_pipeline *pipe = stk_trainer_pipeline(p->trainer);
    stk_model *m = p->model;
    size_t n = 0;
    for (int i = 0; i < stk_model_param_count(m); i++) {
        const stk_param *pa = stk_model_param(m, i);
        if (pa->is_buffer) n += (size_t)stk_tensor_numel(pa->value);
    }
    float *buf = calloc(n ? n : 1, sizeof *buf);
    if (!buf) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = STK_OK;
    for (int pass = 0; pass < 2 && st == STK_OK; pass++) {
        size_t off = 0;
        for (int i = 0; i < stk_model_param_count(m); i++) {
            const stk_param *pa = stk_model_param(m, i);
            if (!pa->is_buffer) continue;
            stk_tensor *v = pa->value;
            int64_t k = stk_tensor_numel(v);
            bool mine = stk_pipeline_owns_param(pipe, i), f32 = stk_tensor_dtype(v) == STK_F32;
            if (pass == 0 && mine && f32) st = stk_tensor_to_host(v, buf + off, (size_t)k * 4);
            if (pass == 0 && mine && !f32) buf[off] = (float)*(int32_t *)stk_tensor_data(v);
            if (pass == 1) {
                for (int64_t j = 0; j < k; j++) buf[off + (size_t)j] /= (float)p->replicas;
                if (f32)
                    st = stk_tensor_copy_from_host(v, buf + off, (size_t)k * 4);
                else
                    *(int32_t *)stk_tensor_data(v) = (int32_t)lrintf(buf[off]);
            }
            off += (size_t)k;
        }
        if (pass == 0 && st == STK_OK) st = stk_ddp_allreduce(p->ddp, buf, n);
    }
    free(buf);
    (void)info;
    return st;
}

stk_status stk_pipe_ranks_average_buffers(stk_pipe_ranks *p, stk_trainer *t, stk_model *model,
                                          stk_ddp *ddp)
{
    p->trainer = t, p->model = model, p->ddp = ddp;
    return stk_trainer_add_hook(t, STK_STEP_AFTER_OPTIMIZER, average_buffers, p);
}

void stk_pipe_ranks_close(stk_pipe_ranks *p) { free(p); }
