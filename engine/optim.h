/* Optimizers (SGD, Adam, AdamW) and learning-rate schedules.
 *
 *     stk_optim_config oc = {.kind = STK_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f,
 *                            .nesterov = true, .weight_decay = 5e-4f};
 *     stk_optim *opt;
 *     STK_TRY(stk_optim_create(&oc, model, &opt));        // the model's trainable parameters
 *     stk_schedule sch = {.kind = STK_SCHEDULE_COSINE, .base_lr = 0.05f, .total_steps = n};
 *     for (step...) {
 *         ... forward, backward ...
 *         stk_optim_set_lr(opt, stk_schedule_lr(&sch, step));
 *         STK_TRY(stk_optim_step(opt));                   // then clears the gradients
 *     }
 *     stk_optim_destroy(opt);
 *
 * The update formulas are PyTorch's (torch.optim.SGD with momentum,
 * dampening, Nesterov and L2 weight decay; Adam with L2 weight decay; AdamW
 * with decoupled weight decay), written once in kernels/scalar_math.h for
 * every backend. Weight decay applies to every parameter, as PyTorch's
 * default single parameter group does. Frozen parameters (requires_grad
 * off) and parameters without a gradient are skipped. State lives outside
 * any step scope.
 */
#pragma once

#include "engine/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stk_optim_kind {
    STK_OPTIM_SGD,
    STK_OPTIM_ADAM,
    STK_OPTIM_ADAMW,
} stk_optim_kind;

typedef struct stk_optim_config {
    stk_optim_kind kind;
    float lr;
    float weight_decay;
    /* SGD */
    float momentum, dampening;
    bool nesterov;
    /* Adam/AdamW: 0 means PyTorch's defaults 0.9, 0.999, 1e-8 */
    float beta1, beta2, eps;
} stk_optim_config;

typedef struct stk_optim stk_optim;

/* Errors: STK_ERR_INVALID_ARG (negative lr/decay, momentum outside [0, 1),
 * Nesterov without momentum or with dampening: PyTorch's rules), STK_ERR_NOMEM. */
stk_status stk_optim_create(const stk_optim_config *cfg, stk_model *model, stk_optim **out);
void stk_optim_destroy(stk_optim *opt);

/* Update every parameter that has a gradient, then drop the gradients. */
stk_status stk_optim_step(stk_optim *opt);
void stk_optim_set_lr(stk_optim *opt, float lr);
float stk_optim_lr(const stk_optim *opt);
/* Change momentum (SGD) and weight decay mid-run (population based
 * training's explore step). Errors: INVALID_ARG (outside the ranges
 * stk_optim_create checks; nothing changes). */
stk_status stk_optim_set_momentum(stk_optim *opt, float momentum);
stk_status stk_optim_set_weight_decay(stk_optim *opt, float weight_decay);
/* Steps taken so far. */
int64_t stk_optim_steps(const stk_optim *opt);

/* Optimizer state as named tensors for checkpoints: "<param>.momentum_buffer"
 * (SGD) or "<param>.exp_avg" and "<param>.exp_avg_sq" (Adam); NULL tensors
 * before the first step. */
int stk_optim_state_count(const stk_optim *opt);
/* Name (thread-local buffer, valid until the next call) and tensor of state i. */
const char *stk_optim_state_name(const stk_optim *opt, int i);
stk_tensor *stk_optim_state_tensor(const stk_optim *opt, int i);
/* The parameter that state i belongs to. */
stk_tensor *stk_optim_state_param(const stk_optim *opt, int i);
const stk_optim_config *stk_optim_get_config(const stk_optim *opt);
/* Restore state i (copied; shape must match the parameter) and the step count. */
stk_status stk_optim_state_set(stk_optim *opt, int i, const stk_tensor *value);
void stk_optim_set_steps(stk_optim *opt, int64_t steps);
const char *stk_optim_kind_name(stk_optim_kind kind);

/* Learning-rate schedules, as a pure function of the step. */
typedef enum stk_schedule_kind {
    STK_SCHEDULE_CONSTANT,
    STK_SCHEDULE_STEP,     /* max(base * gamma^(step / step_size), min_lr) */
    STK_SCHEDULE_COSINE,   /* linear warm-up, then cosine from base to min_lr at total_steps */
    STK_SCHEDULE_ONECYCLE, /* linear warm-up from base/25 to base, cosine down to base/25e4 */
} stk_schedule_kind;

typedef struct stk_schedule {
    stk_schedule_kind kind;
    float base_lr;
    int64_t total_steps;
    int64_t warmup_steps; /* cosine: 0 = none; onecycle: 0 = 30% of total (PyTorch's pct_start) */
    int64_t step_size;    /* STEP */
    float gamma;          /* STEP: 0 means 0.1 */
    float min_lr;         /* COSINE, STEP: the floor (timm's --min-lr); 0 = none */
} stk_schedule;

float stk_schedule_lr(const stk_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
