/* Optimizers and schedules. */
#include "engine/optim.h"

#include "engine/tensor_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    const stk_param *param;
    stk_tensor *s1, *s2; /* momentum buffer, or Adam's exp_avg / exp_avg_sq */
    bool started;        /* SGD: the momentum buffer holds a value */
} slot;

struct stk_optim {
    stk_optim_config cfg;
    slot *slots;
    int n;
    int64_t steps;
};

stk_status stk_optim_set_momentum(stk_optim *opt, float momentum)
{
    if (!(momentum >= 0.f && momentum < 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "momentum %g is outside [0, 1)", (double)momentum);
    if (opt->cfg.nesterov && momentum <= 0.f)
        return stk_error(STK_ERR_INVALID_ARG, "Nesterov momentum needs a momentum > 0");
    opt->cfg.momentum = momentum;
    return STK_OK;
}

stk_status stk_optim_set_weight_decay(stk_optim *opt, float weight_decay)
{
    if (!(weight_decay >= 0.f))
        return stk_error(STK_ERR_INVALID_ARG, "weight decay %g is below 0", (double)weight_decay);
    opt->cfg.weight_decay = weight_decay;
    return STK_OK;
}

const char *stk_optim_kind_name(stk_optim_kind kind)
{
    switch (kind) {
    case STK_OPTIM_SGD: return "sgd";
    case STK_OPTIM_ADAM: return "adam";
    case STK_OPTIM_ADAMW: return "adamw";
    }
    return "unknown";
}

stk_status stk_optim_create(const stk_optim_config *cfg, stk_model *model, stk_optim **out)
{
    *out = NULL;
    stk_optim_config c = *cfg;
    if (!(c.lr >= 0.f) || !(c.weight_decay >= 0.f))
        return stk_error(STK_ERR_INVALID_ARG, "optimizer: lr %g and weight decay %g must be >= 0",
                         (double)c.lr, (double)c.weight_decay);
    if (c.kind == STK_OPTIM_SGD) {
        if (!(c.momentum >= 0.f && c.momentum < 1.f))
            return stk_error(STK_ERR_INVALID_ARG, "sgd: momentum %g is outside [0, 1)",
                             (double)c.momentum);
        if (c.nesterov && (c.momentum <= 0.f || c.dampening != 0.f))
            return stk_error(STK_ERR_INVALID_ARG,
                             "sgd: Nesterov momentum needs a momentum > 0 and zero dampening");
    } else {
        if (c.beta1 == 0.f) c.beta1 = 0.9f;
        if (c.beta2 == 0.f) c.beta2 = 0.999f;
        if (c.eps == 0.f) c.eps = 1e-8f;
        if (!(c.beta1 > 0.f && c.beta1 < 1.f && c.beta2 > 0.f && c.beta2 < 1.f && c.eps > 0.f))
            return stk_error(STK_ERR_INVALID_ARG, "%s: betas must be in (0, 1) and eps > 0",
                             stk_optim_kind_name(c.kind));
    }
    stk_optim *o = calloc(1, sizeof *o);
    if (!o) return stk_error(STK_ERR_NOMEM, "no memory for the optimizer");
    o->cfg = c;
    o->slots = calloc((size_t)stk_model_param_count(model) + 1, sizeof *o->slots);
    if (!o->slots) {
        free(o);
        return stk_error(STK_ERR_NOMEM, "no memory for the optimizer");
    }
    for (int i = 0; i < stk_model_param_count(model); i++) {
        const stk_param *p = stk_model_param(model, i);
        if (!p->is_buffer) o->slots[o->n++].param = p;
    }
    *out = o;
    return STK_OK;
}

void stk_optim_destroy(stk_optim *o)
{
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        stk_tensor_release(o->slots[i].s1);
        stk_tensor_release(o->slots[i].s2);
    }
    free(o->slots);
    free(o);
}

static stk_status ensure_state(stk_tensor **t, const stk_tensor *like)
{
    if (*t) return STK_OK;
    return eng_tensor_new(stk_tensor_device(like), STK_F32, stk_tensor_ndim(like), like->shape,
                          true, t);
}

stk_status stk_optim_step(stk_optim *o)
{
    const stk_optim_config *c = &o->cfg;
    o->steps++;
    float bc1 = 1.f - powf(c->beta1, (float)o->steps), bc2 = 1.f - powf(c->beta2, (float)o->steps);
    for (int i = 0; i < o->n; i++) {
        slot *s = &o->slots[i];
        stk_tensor *p = s->param->value, *g = stk_tensor_grad(p);
        if (!g || !stk_tensor_requires_grad(p)) continue;
        const stk_backend *be;
        stk_status st = eng_backend_of(p, &be);
        if (st != STK_OK) return st;
        if (!stk_tensor_is_contiguous(p) || !stk_tensor_is_contiguous(g))
            return stk_error(STK_ERR_INTERNAL, "optimizer: parameter %s is not contiguous",
                             s->param->name);
        int64_t n = stk_tensor_numel(p);
        if (c->kind == STK_OPTIM_SGD) {
            if (c->momentum != 0.f && (st = ensure_state(&s->s1, p)) != STK_OK) return st;
            be->sgd_step(n, tensor_f32(p), tensor_f32(g), s->s1 ? tensor_f32(s->s1) : NULL, c->lr,
                         c->momentum, c->dampening, c->weight_decay, c->nesterov, !s->started);
            s->started = true;
        } else {
            if ((st = ensure_state(&s->s1, p)) != STK_OK ||
                (st = ensure_state(&s->s2, p)) != STK_OK)
                return st;
            be->adam_step(n, tensor_f32(p), tensor_f32(g), tensor_f32(s->s1), tensor_f32(s->s2),
                          c->lr, c->beta1, c->beta2, c->eps, c->weight_decay,
                          c->kind == STK_OPTIM_ADAMW, bc1, bc2);
        }
        stk_tensor_zero_grad(p);
    }
    return STK_OK;
}

void stk_optim_set_lr(stk_optim *o, float lr) { o->cfg.lr = lr; }
float stk_optim_lr(const stk_optim *o) { return o->cfg.lr; }
int64_t stk_optim_steps(const stk_optim *o) { return o->steps; }
void stk_optim_set_steps(stk_optim *o, int64_t steps) { o->steps = steps; }

int stk_optim_state_count(const stk_optim *o)
{
    return o->cfg.kind == STK_OPTIM_SGD ? (o->cfg.momentum != 0.f ? o->n : 0) : 2 * o->n;
}

const char *stk_optim_state_name(const stk_optim *o, int i)
{
    static _Thread_local char buf[256];
    if (o->cfg.kind == STK_OPTIM_SGD)
        snprintf(buf, sizeof buf, "%s.momentum_buffer", o->slots[i].param->name);
    else
        snprintf(buf, sizeof buf, "%s.%s", o->slots[i / 2].param->name,
                 i % 2 ? "exp_avg_sq" : "exp_avg");
    return buf;
}

stk_tensor *stk_optim_state_tensor(const stk_optim *o, int i)
{
    if (o->cfg.kind == STK_OPTIM_SGD) return o->slots[i].s1;
    return i % 2 ? o->slots[i / 2].s2 : o->slots[i / 2].s1;
}

stk_tensor *stk_optim_state_param(const stk_optim *o, int i)
{
    return (o->cfg.kind == STK_OPTIM_SGD ? &o->slots[i] : &o->slots[i / 2])->param->value;
}

const stk_optim_config *stk_optim_get_config(const stk_optim *o) { return &o->cfg; }

stk_status stk_optim_state_set(stk_optim *o, int i, const stk_tensor *value)
{
    slot *s = o->cfg.kind == STK_OPTIM_SGD ? &o->slots[i] : &o->slots[i / 2];
    stk_tensor **t = o->cfg.kind == STK_OPTIM_SGD || i % 2 == 0 ? &s->s1 : &s->s2;
    stk_status st = ensure_state(t, s->param->value);
    if (st != STK_OK) return st;
    if ((st = stk_tensor_copy(*t, value)) != STK_OK)
        return stk_error_prefix(st, "optimizer state %s", stk_optim_state_name(o, i));
    s->started = true;
    return STK_OK;
}

float stk_schedule_lr(const stk_schedule *s, int64_t step)
{
    double base = s->base_lr, t = (double)step,
           total = (double)(s->total_steps > 0 ? s->total_steps : 1);
    switch (s->kind) {
    case STK_SCHEDULE_CONSTANT: return s->base_lr;
    case STK_SCHEDULE_STEP: {
        double gamma = s->gamma > 0.f ? s->gamma : 0.1;
        int64_t k = s->step_size > 0 ? step / s->step_size : 0;
        return (float)fmax(base * pow(gamma, (double)k), (double)s->min_lr);
    }
    case STK_SCHEDULE_COSINE: {
        double w = (double)s->warmup_steps;
        if (t < w) return (float)(base * (t + 1) / w);
        double lo = s->min_lr;
        if (t >= total) return (float)lo;
        double u = (t - w) / fmax(1.0, total - w);
        return (float)(lo + (base - lo) * 0.5 * (1.0 + cos(M_PI * u)));
    }
    case STK_SCHEDULE_ONECYCLE: {
        double w = s->warmup_steps > 0 ? (double)s->warmup_steps : floor(0.3 * total);
        double lo = base / 25.0, end = lo / 1e4;
        if (t < w) return (float)(lo + (base - lo) * t / fmax(1.0, w));
        double u = fmin(1.0, (t - w) / fmax(1.0, total - 1 - w));
        return (float)(end + (base - end) * 0.5 * (1.0 + cos(M_PI * u)));
    }
    }
    return s->base_lr;
}
