/* The trainer (trainer.h): the step with its hooks, the epoch loop, the
 * evaluation pass, and saving and resuming the position. */
#include "train/trainer.h"

#include "common/trace.h"

#include "common/clock.h"
#include "common/progress.h"
#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/checkpoint.h"
#include "engine/ops.h"
#include "kernels/backend.h"
#include "storage/safetensors.h"
#include "train/batch.h"
#include "train/ema.h"
#include "train/loss_scaler.h"
#include "train/pipeline.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOOKS 8

typedef struct hook {
    stk_step_hook fn;
    void *ctx;
} hook;

/* The context of one parameter's gradient hook (autograd's per-leaf hook). */
typedef struct grad_slot {
    stk_trainer *t;
    int param;
} grad_slot;

struct stk_trainer {
    stk_trainer_config cfg;
    stk_model *model;
    stk_optim *opt;
    stk_loss_scaler scaler;
    bool scale_loss; /* amp in f16 (the GPU); bf16 (the CPU) keeps f32's range: no scaling */
    stk_train_position pos;
    hook hooks[STK_STEP_EVENTS][MAX_HOOKS];
    int n_hooks[STK_STEP_EVENTS];
    grad_slot *grad_slots; /* one per parameter, once a GRAD_READY hook is added */
    stk_step_info *info;   /* the step in progress (for the gradient hooks) */
    stk_ema *ema;          /* ema_decay: the moving average of the weights */
    stk_pipeline *pipe;    /* micro-batches or pipeline stages (NULL: the whole batch) */
    stk_tensor **values;   /* with ema: the model's tensors, buffers included, in order */
};

stk_trainer_config stk_trainer_defaults(void)
{
    /* batch transforms off; timm's Mixup defaults for when they are turned on */
    return (stk_trainer_config){.std = {1, 1, 1}, .mix = {.mix_prob = 1.f, .switch_prob = 0.5f}};
}

/* The average of the model's tensors as they are now. */
static stk_status start_ema(stk_trainer *t)
{
    int n = stk_model_param_count(t->model);
    bool *is_buffer = calloc((size_t)(n ? n : 1), sizeof *is_buffer);
    if (!is_buffer || !(t->values = calloc((size_t)(n ? n : 1), sizeof *t->values))) {
        free(is_buffer);
        return stk_error(STK_ERR_NOMEM, "no memory for a moving average");
    }
    for (int i = 0; i < n; i++) {
        t->values[i] = stk_model_param(t->model, i)->value;
        is_buffer[i] = stk_model_param(t->model, i)->is_buffer;
    }
    stk_status st =
        stk_ema_create(n, t->values, is_buffer, t->cfg.ema_decay, t->cfg.ema_warmup, &t->ema);
    free(is_buffer);
    return st;
}

stk_status stk_trainer_create(const stk_trainer_config *c, stk_model *model, stk_optim *opt,
                              stk_trainer **out)
{
    *out = NULL;
    const stk_copy_engine *dev = c->copy_engine ? c->copy_engine : stk_copy_engine_cpu();
    STK_TRY(stk_batch_mix_check(&c->mix));
    if (c->amp && dev->device != STK_DEVICE_CUDA && stk_cpu_bf16_missing())
        return stk_error(STK_ERR_UNSUPPORTED, "mixed precision (amp) on the CPU %s",
                         stk_cpu_bf16_missing());
    if (!(c->label_smoothing >= 0 && c->label_smoothing < 1))
        return stk_error(STK_ERR_INVALID_ARG, "label smoothing %g is not in [0, 1)",
                         (double)c->label_smoothing);
    if (!(c->clip_grad_norm >= 0 && isfinite(c->clip_grad_norm)) ||
        !(c->clip_grad_value >= 0 && isfinite(c->clip_grad_value)))
        return stk_error(
            STK_ERR_INVALID_ARG, "gradient clipping: bound %g is not a finite number >= 0 (0: off)",
            (double)(c->clip_grad_norm >= 0 && isfinite(c->clip_grad_norm) ? c->clip_grad_value
                                                                           : c->clip_grad_norm));
    if (c->clip_grad_norm > 0 && c->clip_grad_value > 0)
        return stk_error(STK_ERR_INVALID_ARG, "gradient clipping: by norm or by value, not both");
    if (!(c->ema_decay >= 0.f && c->ema_decay < 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "EMA: decay %g is not in (0, 1) (0: no average)",
                         (double)c->ema_decay);
    int micro = c->micro_batches > 1 ? c->micro_batches : 1;
    int stages = c->pipeline.stages > 1 ? c->pipeline.stages : 1;
    if (c->micro_batches < 0 || c->pipeline.stages < 0)
        return stk_error(STK_ERR_INVALID_ARG, "micro-batches %d or pipeline stages %d below 0",
                         c->micro_batches, c->pipeline.stages);
    if ((micro > 1 || stages > 1) && stk_batch_mix_enabled(&c->mix))
        return stk_error(STK_ERR_INVALID_ARG, "mixup/cutmix/erase with --micro-batches or "
                                              "--pipeline: not supported (each mixes a batch)");
    if (stages > 1 && c->amp)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--amp with --pipeline: not supported (the stages run in f32)");
    stk_trainer *t = calloc(1, sizeof *t);
    if (!t) return stk_error(STK_ERR_NOMEM, "no memory for a trainer");
    if (micro > 1 || stages > 1) {
        stk_pipeline_config pc = c->pipeline;
        pc.stages = stages;
        pc.micro_batches = micro;
        pc.autocast = c->amp;
        stk_status st = stk_pipeline_create(model, &pc, &t->pipe);
        if (st != STK_OK) {
            free(t);
            return st;
        }
    }
    t->cfg = *c;
    t->cfg.copy_engine = dev;
    t->model = model;
    t->opt = opt;
    stk_loss_scaler_init(&t->scaler);
    t->scale_loss = c->amp && dev->device == STK_DEVICE_CUDA;
    t->pos = stk_train_position_start(c->seed);
    if (c->ema_decay > 0) {
        stk_status st = start_ema(t);
        if (st != STK_OK) {
            stk_trainer_destroy(t);
            return st;
        }
    }
    *out = t;
    return STK_OK;
}

const stk_pipeline *stk_trainer_pipeline(const stk_trainer *t) { return t->pipe; }

void stk_trainer_destroy(stk_trainer *t)
{
    if (!t) return;
    if (t->grad_slots) /* the model outlives the trainer: take the hooks back */
        for (int i = 0; i < stk_model_param_count(t->model); i++) {
            stk_tensor *p = stk_model_param(t->model, i)->value;
            if (stk_tensor_requires_grad(p)) stk_tensor_set_grad_hook(p, NULL, NULL);
        }
    free(t->grad_slots);
    stk_pipeline_destroy(t->pipe);
    stk_ema_destroy(t->ema);
    free(t->values);
    free(t);
}

static stk_status run_hooks(stk_trainer *t, stk_step_info *info, stk_step_event event)
{
    info->event = event;
    for (int i = 0; i < t->n_hooks[event]; i++) {
        const hook *h = &t->hooks[event][i];
        stk_status st = h->fn(h->ctx, info);
        if (st != STK_OK) return st;
    }
    return STK_OK;
}

static stk_status on_grad_ready(void *ctx, stk_tensor *leaf)
{
    grad_slot *g = ctx;
    stk_trainer *t = g->t;
    if (!t->info) return STK_OK;   /* a backward outside the trainer's step */
    stk_step_info info = *t->info; /* the step's, with this parameter */
    info.param = g->param;
    info.grad = stk_tensor_grad(leaf);
    return run_hooks(t, &info, STK_STEP_GRAD_READY);
}

/* Hook every trainable parameter's gradient (the first GRAD_READY hook). */
static stk_status hook_gradients(stk_trainer *t)
{
    int np = stk_model_param_count(t->model);
    if (!(t->grad_slots = calloc((size_t)(np ? np : 1), sizeof *t->grad_slots)))
        return stk_error(STK_ERR_NOMEM, "no memory for gradient hooks");
    for (int i = 0; i < np; i++) {
        stk_tensor *p = stk_model_param(t->model, i)->value;
        t->grad_slots[i] = (grad_slot){t, i};
        if (stk_tensor_requires_grad(p)) {
            stk_status st = stk_tensor_set_grad_hook(p, on_grad_ready, &t->grad_slots[i]);
            if (st != STK_OK) return st;
        }
    }
    return STK_OK;
}

stk_status stk_trainer_add_hook(stk_trainer *t, stk_step_event event, stk_step_hook fn, void *ctx)
{
    if ((int)event < 0 || event >= STK_STEP_EVENTS || !fn)
        return stk_error(STK_ERR_INVALID_ARG, "add_hook: no such event (%d) or no function",
                         (int)event);
    if (t->n_hooks[event] == MAX_HOOKS)
        return stk_error(STK_ERR_INVALID_ARG, "add_hook: at most %d hooks per event", MAX_HOOKS);
    if (event == STK_STEP_GRAD_READY && !t->grad_slots) STK_TRY(hook_gradients(t));
    t->hooks[event][t->n_hooks[event]++] = (hook){fn, ctx};
    return STK_OK;
}

/* --clip-grad-norm / --clip-grad-value on the final, unscaled gradients. */
static stk_status clip_gradients(stk_trainer *t, stk_step_info *info)
{
    if (!(t->cfg.clip_grad_norm > 0) && !(t->cfg.clip_grad_value > 0)) return STK_OK;
    int np = stk_model_param_count(t->model);
    /* once per step: no heap allocation for models up to 256 tensors (resnet18: 122) */
    stk_tensor *small[256] = {0}, **grads = small;
    if (np > 256 && !(grads = calloc((size_t)np, sizeof *grads)))
        return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < np; i++) grads[i] = stk_tensor_grad(stk_model_param(t->model, i)->value);
    stk_status st = t->cfg.clip_grad_norm > 0
                        ? stk_clip_grad_norm(np, grads, t->cfg.clip_grad_norm, &info->grad_norm)
                        : stk_clip_grad_value(np, grads, t->cfg.clip_grad_value);
    if (grads != small) free(grads);
    return st;
}

/* The step's loss read back and checked; the accuracy counted. */
static stk_status loss_read(stk_trainer *t, stk_step_info *info, const int32_t *host_labels,
                            const char *where_epoch, const char *ep, stk_step_result *r)
{
    if (!isfinite(r->loss))
        return stk_error(STK_ERR_DIVERGED,
                         "the loss is %s at step %" PRId64 "%s%s: training diverged",
                         isnan(r->loss) ? "NaN" : "infinite", info->step + 1, where_epoch, ep);
    if (host_labels)
        STK_TRY(
            stk_batch_count_correct(info->logits, host_labels, info->count, &r->top1, &r->top5));
    info->loss_value = r->loss;
    if (t->cfg.schedule.base_lr > 0)
        stk_optim_set_lr(t->opt, stk_schedule_lr(&t->cfg.schedule, info->step));
    info->lr = stk_optim_lr(t->opt);
    return STK_OK;
}

/* Forward, loss, AFTER_FORWARD hooks, backward (GRAD_READY hooks during it). */
static stk_status whole_batch_pass(stk_trainer *t, stk_step_info *info, const int32_t *host_labels,
                                   const char *where_epoch, const char *ep, stk_step_result *r)
{
    /* the trace's phases (on a GPU: until the loss is read back, forward
     * includes its kernels; backward and the optimizer are their launches) */
    stk_trace_begin("forward", "step");
    stk_status fst = stk_model_forward(t->model, info->input, &info->logits);
    if (fst == STK_OK)
        fst = stk_batch_mix_loss(info->logits, info->labels, info->labels2, info->lam,
                                 t->cfg.label_smoothing, &info->loss);
    if (fst == STK_OK) r->loss = stk_tensor_item(info->loss);
    stk_trace_end();
    STK_TRY(fst);
    STK_TRY(loss_read(t, info, host_labels, where_epoch, ep, r));
    STK_TRY(run_hooks(t, info, STK_STEP_AFTER_FORWARD));
    /* backward (of the scaled loss under amp), the hooks, the optimizer (the
     * loss scaler's under amp, in f32: it may skip the update) */
    stk_tensor *target = info->loss;
    if (t->scale_loss) {
        info->loss_scale = t->scaler.scale;
        STK_TRY(stk_loss_scaler_scale(&t->scaler, info->loss, &target));
    }
    t->info = info;
    stk_trace_begin("backward", "step");
    stk_status st = stk_backward(target, NULL, false);
    stk_trace_end();
    t->info = NULL;
    return st;
}

/* Every micro-batch's forward and backward (pipeline.h), then the hooks:
 * AFTER_FORWARD, and GRAD_READY for each gradient, the last layer first
 * (the gradients are final only once every micro-batch is through). */
static stk_status pipeline_pass(stk_trainer *t, stk_step_info *info, const int32_t *host_labels,
                                const char *where_epoch, const char *ep, stk_step_result *r)
{
    if (t->scale_loss) info->loss_scale = t->scaler.scale;
    stk_tensor *logits;
    stk_trace_begin("forward+backward", "step");
    stk_status st =
        stk_pipeline_step(t->pipe, info->input, info->labels, t->cfg.label_smoothing,
                          info->loss_scale, (uint64_t)info->step + 1, &r->loss, &logits, NULL);
    stk_trace_end();
    STK_TRY(st);
    st = stk_detach(logits, &info->logits); /* the step scope's */
    stk_tensor_release(logits);
    if (st == STK_OK) st = stk_tensor_scalar(r->loss, &info->loss);
    STK_TRY(st);
    STK_TRY(loss_read(t, info, host_labels, where_epoch, ep, r));
    STK_TRY(run_hooks(t, info, STK_STEP_AFTER_FORWARD));
    if (!t->n_hooks[STK_STEP_GRAD_READY]) return STK_OK;
    for (int i = stk_model_param_count(t->model) - 1; i >= 0; i--) {
        stk_tensor *p = stk_model_param(t->model, i)->value;
        if (!stk_tensor_requires_grad(p) || !stk_tensor_grad(p)) continue;
        stk_step_info gi = *info;
        gi.param = i;
        gi.grad = stk_tensor_grad(p);
        STK_TRY(run_hooks(t, &gi, STK_STEP_GRAD_READY));
    }
    return STK_OK;
}

/* forward .. optimizer, inside the caller's scope and autocast region. */
static stk_status step_body(stk_trainer *t, stk_step_info *info, const int32_t *host_labels,
                            int64_t epoch, stk_step_result *r)
{
    const char *where_epoch = epoch >= 0 ? " (epoch " : "";
    char ep[32] = "";
    if (epoch >= 0) snprintf(ep, sizeof ep, "%" PRId64 ")", epoch + 1);
    STK_TRY(run_hooks(t, info, STK_STEP_BEFORE_FORWARD));
    if (t->pipe)
        STK_TRY(pipeline_pass(t, info, host_labels, where_epoch, ep, r));
    else
        STK_TRY(whole_batch_pass(t, info, host_labels, where_epoch, ep, r));
    STK_TRY(run_hooks(t, info, STK_STEP_AFTER_BACKWARD));
    stk_status st = STK_OK;
    if (t->cfg.amp) stk_autocast_end(); /* the optimizer step is f32 */
    stk_trace_begin("optimizer", "step");
    bool finite = true;
    if (t->scale_loss) st = stk_loss_scaler_unscale(&t->scaler, t->model, &finite);
    if (st == STK_OK && finite) st = clip_gradients(t, info);
    if (st == STK_OK && t->scale_loss) {
        st = stk_loss_scaler_update(&t->scaler, t->model, t->opt, finite, &r->stepped);
    } else if (st == STK_OK) {
        st = stk_optim_step(t->opt);
        r->stepped = true;
    }
    r->grad_norm = info->grad_norm;
    stk_trace_end();
    if (t->cfg.amp) stk_autocast_begin(); /* balanced by the caller's end */
    STK_TRY(st);
    const char *bad = NULL;
    STK_TRY(stk_model_check_finite(t->model, &bad));
    if (bad)
        return stk_error(STK_ERR_DIVERGED,
                         "%s is not finite after step %" PRId64 "%s%s: training diverged", bad,
                         info->step + 1, where_epoch, ep);
    info->stepped = r->stepped;
    if (t->ema && r->stepped) STK_TRY(stk_ema_update(t->ema, t->values));
    return run_hooks(t, info, STK_STEP_AFTER_OPTIMIZER);
}

/* The batch transforms on the step's input (labels read back when the
 * caller has none on the host). */
static stk_status mix_batch(stk_trainer *t, stk_step_info *info, const int32_t *host_labels)
{
    int32_t *copy = NULL;
    if (!host_labels) {
        size_t bytes = (size_t)info->count * sizeof *copy;
        if (!(copy = malloc(bytes ? bytes : 1)))
            return stk_error(STK_ERR_NOMEM, "no memory for %d labels", info->count);
        stk_status st = stk_tensor_to_host(info->labels, copy, bytes);
        if (st != STK_OK) {
            free(copy);
            return st;
        }
        host_labels = copy;
    }
    stk_status st =
        stk_batch_mix_apply(&t->cfg.mix, (uint64_t)t->pos.seed, (uint64_t)info->step, info->input,
                            host_labels, &info->input, &info->labels2, &info->lam);
    free(copy);
    return st;
}

/* One step on tensors made inside `scope`'s lifetime; epoch < 0 when unknown;
 * flow: the batch's trace flow id (0: none). */
static stk_status step(stk_trainer *t, stk_tensor *x, stk_tensor *y, const int32_t *host_labels,
                       int count, int64_t epoch, uint64_t flow, stk_step_result *r)
{
    memset(r, 0, sizeof *r);
    r->count = count;
    if (!t->opt)
        return stk_error(STK_ERR_INVALID_ARG, "step: the trainer was made without an optimizer");
    stk_step_info info = {.step = t->pos.step,
                          .model = t->model,
                          .input = x,
                          .labels = y,
                          .lam = 1.f,
                          .count = count,
                          .loss_scale = 1.f,
                          .grad_norm = NAN,
                          .param = -1};
    if (stk_batch_mix_enabled(&t->cfg.mix)) STK_TRY(mix_batch(t, &info, host_labels));
    stk_trace_step();
    char what[32] = "";
    if (stk_trace_enabled()) snprintf(what, sizeof what, "step %" PRId64, info.step + 1);
    stk_trace_begin_args("step", "step", what);
    if (flow) stk_trace_flow('f', flow);
    if (t->cfg.amp) stk_autocast_begin();
    stk_status st = step_body(t, &info, host_labels, epoch, r);
    if (t->cfg.amp) stk_autocast_end();
    stk_trace_end();
    if (st == STK_OK) t->pos.step++;
    return st;
}

stk_status stk_trainer_step(stk_trainer *t, const stk_device_batch *b, stk_step_result *r)
{
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_tensor *x, *y;
    stk_status st = stk_batch_tensors(b, t->cfg.mean, t->cfg.std, &x, &y);
    if (st == STK_OK)
        st = step(t, x, y, b->host_labels, b->count, (int64_t)b->epoch, b->trace_id, r);
    stk_scope_end(s);
    return st;
}

stk_status stk_trainer_step_tensors(stk_trainer *t, stk_tensor *x, stk_tensor *y,
                                    const int32_t *host_labels, stk_step_result *r)
{
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_status st = step(t, x, y, host_labels, (int)stk_tensor_dim(x, 0), -1, 0, r);
    stk_scope_end(s);
    return st;
}

/* The epoch's means and rates so far. */
static void epoch_figures(stk_epoch_stats *out, double seconds, double loss_sum, uint64_t correct,
                          double waited)
{
    out->seconds = seconds;
    if (out->images) {
        out->loss = loss_sum / (double)out->images;
        out->accuracy = 100.0 * (double)correct / (double)out->images;
    }
    out->images_per_sec = (double)out->images / seconds;
    out->stall_pct = 100 * waited / seconds;
}

void stk_trainer_epoch_start(stk_trainer *t, stk_epoch_run *run)
{
    memset(run, 0, sizeof *run);
    run->t0 = stk_clock_sec();
    stk_model_train(t->model, true);
}

stk_status stk_trainer_epoch_step(stk_trainer *t, stk_epoch_run *run, const stk_device_batch *b,
                                  double waited_s)
{
    stk_step_result r;
    run->waited += waited_s;
    STK_TRY(stk_trainer_step(t, b, &r));
    run->loss_sum += (double)r.loss * r.count;
    run->correct += (uint64_t)r.top1;
    run->stats.images += (uint64_t)r.count;
    run->stats.steps++;
    epoch_figures(&run->stats, stk_clock_sec() - run->t0, run->loss_sum, run->correct, run->waited);
    return STK_OK;
}

void stk_trainer_epoch_finish(stk_trainer *t, int64_t epoch, stk_epoch_run *run,
                              stk_epoch_stats *out)
{
    epoch_figures(&run->stats, stk_clock_sec() - run->t0, run->loss_sum, run->correct, run->waited);
    *out = run->stats;
    t->pos.epoch = epoch + 1;
    t->pos.loader = (stk_loader_position){
        .seed = (uint64_t)t->pos.seed, .epoch = (uint64_t)epoch + 1, .cursor = 0};
}

stk_status stk_trainer_train_epoch(stk_trainer *t, stk_loader *l, stk_h2d *h, int64_t epoch,
                                   stk_epoch_progress progress, void *ctx, stk_epoch_stats *out)
{
    memset(out, 0, sizeof *out);
    STK_TRY(stk_h2d_drain(h));
    STK_TRY(stk_loader_start_epoch(l, (uint64_t)epoch));
    stk_epoch_run run;
    stk_trainer_epoch_start(t, &run);
    stk_status st;
    for (;;) {
        double w0 = stk_clock_sec();
        stk_device_batch *b;
        stk_trace_begin("wait for batch", "step");
        st = stk_h2d_next(h, &b);
        stk_trace_end();
        if (st == STK_END) break;
        if (st != STK_OK) return st;
        st = stk_trainer_epoch_step(t, &run, b, stk_clock_sec() - w0);
        stk_h2d_release(h, b);
        if (st != STK_OK) return st;
        stk_trace_counter("images/s", run.stats.images_per_sec);
        if (progress && (st = progress(ctx, &run.stats)) != STK_OK) return st;
    }
    stk_trainer_epoch_finish(t, epoch, &run, out);
    return STK_OK;
}

stk_loader_options stk_trainer_eval_options(const stk_trainer *t, const char *transform, int batch,
                                            int workers)
{
    stk_loader_options o = stk_loader_defaults();
    o.batch_size = batch;
    o.workers = workers;
    o.transform = transform;
    o.shuffle = false;
    o.fast_decode = false; /* evaluation decodes accurately */
    o.host_memory = t->cfg.copy_engine->host_memory;
    return o;
}

void stk_trainer_eval_start(stk_trainer *t, stk_eval_run *run)
{
    memset(run, 0, sizeof *run);
    run->t0 = stk_clock_sec();
    run->was_training = stk_model_is_training(t->model);
    stk_model_train(t->model, false);
}

stk_status stk_trainer_eval_batch(stk_trainer *t, stk_eval_run *run, const stk_device_batch *b)
{
    stk_scope *s;
    STK_TRY(stk_scope_begin(&s));
    stk_no_grad_begin();
    stk_tensor *x, *y, *logits, *loss;
    int t1, t5;
    stk_status st;
    if ((st = stk_batch_tensors(b, t->cfg.mean, t->cfg.std, &x, &y)) == STK_OK &&
        (st = stk_model_forward(t->model, x, &logits)) == STK_OK &&
        (st = stk_cross_entropy(logits, y, 0.f, &loss)) == STK_OK &&
        (st = stk_batch_count_confusion(logits, b->host_labels, b->count, &t1, &t5,
                                        run->confusion)) == STK_OK) {
        run->c1 += (uint64_t)t1;
        run->c5 += (uint64_t)t5;
        run->loss_sum += (double)stk_tensor_item(loss) * b->count;
        run->images += (uint64_t)b->count;
    }
    stk_no_grad_end();
    stk_scope_end(s);
    return st;
}

void stk_trainer_eval_finish(stk_trainer *t, stk_eval_run *run, stk_eval_result *r)
{
    stk_model_train(t->model, run->was_training);
    memset(r, 0, sizeof *r);
    r->images = run->images;
    if (run->images) {
        r->loss = run->loss_sum / (double)run->images;
        r->top1 = 100.0 * (double)run->c1 / (double)run->images;
        r->top5 = 100.0 * (double)run->c5 / (double)run->images;
    }
    r->seconds = stk_clock_sec() - run->t0;
}

stk_status stk_trainer_evaluate(stk_trainer *t, stk_loader *l, const char *progress_label,
                                stk_eval_result *r)
{
    return stk_trainer_evaluate_per_class(t, l, progress_label, r, NULL);
}

stk_status stk_trainer_evaluate_per_class(stk_trainer *t, stk_loader *l, const char *progress_label,
                                          stk_eval_result *r, uint64_t *confusion)
{
    memset(r, 0, sizeof *r);
    stk_h2d *h = NULL;
    stk_eval_run run;
    stk_trainer_eval_start(t, &run);
    if (confusion) {
        size_t k = (size_t)stk_model_get_config(t->model)->classes;
        memset(confusion, 0, k * k * sizeof *confusion);
        run.confusion = confusion;
    }
    uint64_t done = 0;
    stk_progress p;
    stk_progress_init(&p, progress_label ? progress_label : "eval", stk_loader_batches(l),
                      progress_label ? stderr : NULL);
    stk_status st;
    if ((st = stk_h2d_open(l, t->cfg.copy_engine, &h)) != STK_OK) goto out;
    if ((st = stk_loader_start_epoch(l, 0)) != STK_OK) goto out;
    stk_device_batch *b;
    while ((st = stk_h2d_next(h, &b)) == STK_OK) {
        st = stk_trainer_eval_batch(t, &run, b);
        stk_h2d_release(h, b);
        if (st != STK_OK) break;
        stk_progress_update(&p, ++done);
    }
    if (st == STK_END) st = STK_OK;
    stk_progress_finish(&p);
out:
    stk_h2d_close(h);
    stk_eval_result res;
    stk_trainer_eval_finish(t, &run, &res);
    if (st == STK_OK)
        *r = res;
    else
        r->seconds = res.seconds;
    return st;
}

stk_train_position *stk_trainer_position(stk_trainer *t) { return &t->pos; }

stk_model *stk_trainer_model(stk_trainer *t) { return t->model; }

stk_optim *stk_trainer_optim(stk_trainer *t) { return t->opt; }

stk_status stk_trainer_set_base_lr(stk_trainer *t, float lr)
{
    if (!(lr >= 0.f)) return stk_error(STK_ERR_INVALID_ARG, "lr %g is below 0", (double)lr);
    if (t->cfg.schedule.base_lr > 0)
        t->cfg.schedule.base_lr = lr; /* the next step's rate */
    else if (t->opt)
        stk_optim_set_lr(t->opt, lr); /* no schedule: the rate */
    return STK_OK;
}

stk_status stk_trainer_set_label_smoothing(stk_trainer *t, float smoothing)
{
    if (!(smoothing >= 0.f && smoothing < 1.f))
        return stk_error(STK_ERR_INVALID_ARG, "label smoothing %g is outside [0, 1)",
                         (double)smoothing);
    t->cfg.label_smoothing = smoothing;
    return STK_OK;
}

float stk_trainer_loss_scale(const stk_trainer *t) { return t->scale_loss ? t->scaler.scale : 1.f; }

int64_t stk_trainer_skipped_steps(const stk_trainer *t) { return t->scaler.skipped; }

stk_status stk_trainer_save(const stk_trainer *t, const char *path, int n_extra,
                            const char *const *keys, const char *const *values)
{
    enum { MAX_META = 36 }; /* the position's, the normalisation, the average's, the caller's */
    if (n_extra < 0 || n_extra > MAX_META - STK_TRAIN_POSITION_KEYS - 5)
        return stk_error(STK_ERR_INVALID_ARG, "save: at most %d extra metadata pairs",
                         MAX_META - STK_TRAIN_POSITION_KEYS - 5);
    const char *k[MAX_META], *v[MAX_META];
    stk_train_position_text text;
    stk_train_position_to_meta(&t->pos, k, v, &text);
    int n = STK_TRAIN_POSITION_KEYS;
    /* the input normalisation, so that an evaluation of this checkpoint
     * computes what training's did (stk_trainer_normalisation_from) */
    char stats[2][96];
    snprintf(stats[0], sizeof stats[0], "%.9g,%.9g,%.9g", (double)t->cfg.mean[0],
             (double)t->cfg.mean[1], (double)t->cfg.mean[2]);
    snprintf(stats[1], sizeof stats[1], "%.9g,%.9g,%.9g", (double)t->cfg.std[0],
             (double)t->cfg.std[1], (double)t->cfg.std[2]);
    k[n] = "input_mean", v[n++] = stats[0];
    k[n] = "input_std", v[n++] = stats[1];
    for (int i = 0; i < n_extra; i++) k[n] = keys[i], v[n++] = values[i];
    if (!t->ema) return stk_checkpoint_save(path, t->model, t->opt, n, k, v);
    char ema[2][32];
    snprintf(ema[0], sizeof ema[0], "%.9g", (double)stk_ema_decay(t->ema));
    snprintf(ema[1], sizeof ema[1], "%" PRId64, stk_ema_updates(t->ema));
    k[n] = "ema_decay", v[n++] = ema[0];
    k[n] = "ema_updates", v[n++] = ema[1];
    k[n] = "ema_warmup", v[n++] = stk_ema_warmup(t->ema) ? "1" : "0";
    return stk_checkpoint_save_with_ema(path, t->model, t->opt, stk_ema_tensors(t->ema), n, k, v);
}

stk_status stk_trainer_resume(stk_trainer *t, const char *path)
{
    stk_train_position p;
    STK_TRY(stk_train_position_read(path, &p));
    int64_t updates = 0;
    if (t->ema) { /* checked before the model changes */
        stk_safetensors *f;
        STK_TRY(stk_safetensors_read(path, &f));
        const char *u = stk_safetensors_meta(f, "ema_updates");
        char *end = NULL;
        if (u) updates = strtoll(u, &end, 10);
        bool ok = u && end && !*end && updates >= 0;
        stk_safetensors_free(f);
        if (!ok || !stk_checkpoint_has_ema(path))
            return stk_error(
                STK_ERR_FORMAT,
                "%s holds no moving average of the weights (trained without --ema-decay)", path);
    }
    stk_load_report rep;
    STK_TRY(stk_checkpoint_load(path, t->model, t->opt, true, &rep));
    if (t->ema) {
        STK_TRY(stk_checkpoint_load_ema(path, t->model, stk_ema_tensors(t->ema)));
        stk_ema_set_updates(t->ema, updates);
    }
    t->pos = p;
    return STK_OK;
}

struct stk_ema *stk_trainer_ema(stk_trainer *t) { return t->ema; }

stk_status stk_trainer_evaluate_ema(stk_trainer *t, stk_loader *l, const char *progress_label,
                                    stk_eval_result *r)
{
    if (!t->ema)
        return stk_error(STK_ERR_INVALID_ARG, "evaluate_ema: the trainer keeps no average");
    STK_TRY(stk_ema_swap(t->ema, t->values));
    stk_status st = stk_trainer_evaluate(t, l, progress_label, r);
    stk_status back = stk_ema_swap(t->ema, t->values);
    return st != STK_OK ? st : back;
}

stk_status stk_trainer_normalisation_from(const stk_safetensors *f, float mean[3], float std[3])
{
    const char *keys[2] = {"input_mean", "input_std"};
    float *dst[2] = {mean, std};
    float got[2][3];
    for (int k = 0; k < 2; k++) {
        const char *v = stk_safetensors_meta(f, keys[k]);
        if (!v) return STK_OK; /* a checkpoint from before: the caller's values stay */
        char *end = (char *)v;
        for (int c = 0; c < 3; c++) {
            const char *at = c ? end + 1 : end;
            if (c && *end != ',') goto bad;
            got[k][c] = strtof(at, &end);
            if (end == at || !isfinite(got[k][c]) || (k == 1 && !(got[k][c] > 0))) goto bad;
        }
        if (*end) goto bad;
        continue;
    bad:
        return stk_error(STK_ERR_CORRUPT, "%s: damaged checkpoint metadata: \"%s\" is \"%.60s\"",
                         f->path, keys[k], v);
    }
    for (int k = 0; k < 2; k++) memcpy(dst[k], got[k], sizeof got[k]);
    return STK_OK;
}
