/* The learning-rate range test (lr_find.h). */
#include "train/lr_find.h"

#include "train/snapshot_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

stk_status stk_lr_sweep_init(stk_lr_sweep *s, double start, double end, int steps, double beta,
                             double stop_factor)
{
    memset(s, 0, sizeof *s);
    if (!(start > 0 && end > start && isfinite(end)))
        return stk_error(STK_ERR_INVALID_ARG,
                         "lr-find: the sweep from %g to %g must rise from above 0", start, end);
    /* the suggestion (steepest descent of the smoothed loss) needs 3 points */
    if (steps < 3 || steps > 100000)
        return stk_error(STK_ERR_INVALID_ARG, "lr-find: %d steps (3..100000)", steps);
    if (!(beta >= 0 && beta < 1))
        return stk_error(STK_ERR_INVALID_ARG, "lr-find: smoothing %g is not in [0, 1)", beta);
    if (!(stop_factor > 1 && isfinite(stop_factor)))
        return stk_error(STK_ERR_INVALID_ARG, "lr-find: stop factor %g is not above 1",
                         stop_factor);
    s->start = start, s->end = end, s->steps = steps, s->beta = beta;
    s->stop_factor = stop_factor;
    s->best = INFINITY;
    if (!(s->lr = calloc((size_t)steps, sizeof *s->lr)) ||
        !(s->loss = calloc((size_t)steps, sizeof *s->loss)) ||
        !(s->smooth = calloc((size_t)steps, sizeof *s->smooth))) {
        stk_lr_sweep_free(s);
        return stk_error(STK_ERR_NOMEM, "out of memory for %d steps", steps);
    }
    return STK_OK;
}

void stk_lr_sweep_free(stk_lr_sweep *s)
{
    free(s->lr);
    free(s->loss);
    free(s->smooth);
    s->lr = s->loss = s->smooth = NULL;
}

double stk_lr_sweep_lr(const stk_lr_sweep *s, int i)
{
    return s->start * pow(s->end / s->start, (double)i / (double)(s->steps - 1));
}

bool stk_lr_sweep_record(stk_lr_sweep *s, double loss)
{
    if (s->n >= s->steps) return true;
    int i = s->n++;
    s->lr[i] = stk_lr_sweep_lr(s, i);
    s->loss[i] = loss;
    s->avg = s->beta * s->avg + (1 - s->beta) * loss;
    double smooth = s->avg / (1 - pow(s->beta, i + 1)); /* bias-corrected, as fastai */
    s->smooth[i] = smooth;
    if (smooth < s->best) s->best = smooth, s->best_at = i;
    if (!isfinite(smooth) || smooth > s->stop_factor * s->best) {
        s->diverged = true;
        return true;
    }
    return s->n == s->steps;
}

void stk_lr_sweep_suggest(const stk_lr_sweep *s, stk_lr_suggestion *out)
{
    *out = (stk_lr_suggestion){NAN, NAN, -1, -1};
    if (s->n < 3) return;
    out->min_at = s->best_at;
    out->min_over_10 = s->lr[s->best_at] / 10;
    /* np.gradient(smooth, log(lr)): the steps are even in log(lr), so central
     * differences inside and one-sided ones at the ends */
    double h = log(s->end / s->start) / (double)(s->steps - 1), lowest = INFINITY;
    for (int i = 0; i < s->n; i++) {
        double g = i == 0          ? (s->smooth[1] - s->smooth[0]) / h
                   : i == s->n - 1 ? (s->smooth[i] - s->smooth[i - 1]) / h
                                   : (s->smooth[i + 1] - s->smooth[i - 1]) / (2 * h);
        if (isfinite(g) && g < lowest) lowest = g, out->steepest_at = i;
    }
    if (out->steepest_at >= 0) out->steepest = s->lr[out->steepest_at];
}

/* Steps over the loader, epoch after epoch, until the sweep stops. */
static stk_status sweep(stk_trainer *t, stk_optim *opt, stk_loader *l, stk_h2d *h,
                        const stk_lr_find_options *o, stk_lr_sweep *s)
{
    bool stop = false;
    for (uint64_t epoch = 0; !stop; epoch++) {
        STK_TRY(stk_h2d_drain(h));
        STK_TRY(stk_loader_start_epoch(l, epoch));
        stk_model_train(stk_trainer_model(t), true);
        int in_epoch = 0;
        while (!stop) {
            stk_device_batch *b;
            stk_status st = stk_h2d_next(h, &b);
            if (st == STK_END) break;
            STK_TRY(st);
            stk_optim_set_lr(opt, (float)stk_lr_sweep_lr(s, s->n));
            stk_step_result r;
            st = stk_trainer_step(t, b, &r);
            stk_h2d_release(h, b);
            if (st == STK_ERR_DIVERGED) /* a loss or a weight not finite: the end */
                r.loss = INFINITY;
            else
                STK_TRY(st);
            stop = stk_lr_sweep_record(s, (double)r.loss);
            in_epoch++;
            if (o->progress) STK_TRY(o->progress(o->ctx, s));
        }
        if (!in_epoch) return stk_error(STK_ERR_INVALID_ARG, "lr-find: the loader gives no batch");
    }
    return stk_h2d_drain(h);
}

stk_status stk_lr_find(stk_model *model, stk_loader *l, stk_h2d *h, const stk_lr_find_options *o,
                       stk_lr_sweep *s)
{
    stk_trainer_config c = o->trainer;
    c.schedule = (stk_schedule){0}; /* the sweep sets every step's lr */
    c.ema_decay = 0;
    stk_weights_snapshot k = {0};
    stk_optim *opt = NULL;
    stk_trainer *t = NULL;
    bool was_training = stk_model_is_training(model);
    stk_status st = stk_weights_snapshot_take(&k, model);
    bool kept_all = st == STK_OK; /* else nothing changed the model: nothing to put back */
    if (st == STK_OK) st = stk_optim_create(&o->optim, model, &opt);
    if (st == STK_OK) st = stk_trainer_create(&c, model, opt, &t);
    if (st == STK_OK) st = sweep(t, opt, l, h, o, s);
    stk_trainer_destroy(t);
    stk_optim_destroy(opt);
    for (int i = 0; i < stk_model_param_count(model); i++) /* no gradient left behind */
        stk_tensor_zero_grad(stk_model_param(model, i)->value);
    stk_status back = kept_all ? stk_weights_snapshot_restore(&k, model) : STK_OK;
    stk_weights_snapshot_free(&k);
    stk_model_train(model, was_training);
    return st != STK_OK ? st : back;
}
