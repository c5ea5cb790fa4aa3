/* A run's fit (run.h): stk_trainer_fit over the run's loaders, with the
 * run's own callbacks (the device's peak, Ctrl-C through the caller's
 * flag, the ranks' figures, metrics.csv and TensorBoard) around the
 * caller's hooks, and the whole run's figures. */
#include "run/run.h"

#include "common/clock.h"
#include "device/device.h"

#include <math.h>
#include <string.h>

static stk_status run_epoch_begin(void *ctx, int64_t epoch)
{
    stk_run *r = ctx;
    stk_device_reset_peak(r->a.device.kind); /* each epoch's own peak */
    return r->hooks.epoch_begin ? r->hooks.epoch_begin(r->hooks.ctx, epoch) : STK_OK;
}

static stk_status run_progress(void *ctx, const stk_epoch_stats *es)
{
    stk_run *r = ctx;
    if (r->hooks.progress) STK_TRY(r->hooks.progress(r->hooks.ctx, es));
    return r->hooks.cancel && *r->hooks.cancel ? stk_error(STK_ERR_CANCELLED, "interrupted")
                                               : STK_OK;
}

/* The job's figures on every rank; the ranks wait for rank 0's evaluation at
 * most --dist-timeout plus twice their training time for as many images. */
static stk_status run_reduce(void *ctx, stk_fit_epoch *e)
{
    stk_run *r = ctx;
    if (r->hooks.epoch_end) r->hooks.epoch_end(r->hooks.ctx);
    if (!r->ddp) return STK_OK;
    double per_rank = e->train->images_per_sec;
    double allowance = per_rank > 0 ? 2.0 * (double)r->val_count / per_rank : 0;
    if (e->val_ema) allowance *= 2; /* the average is evaluated too */
    return stk_ddp_reduce_epoch(r->ddp, e->train, e->val, e->val_ema, allowance);
}

stk_status stk_run_epoch_done(void *ctx, const stk_fit_epoch *e, bool *stop)
{
    stk_run *r = ctx;
    const stk_epoch_stats *es = e->train;
    r->ips_sum += es->images_per_sec;
    r->stall_sum += es->stall_pct;
    stk_run_epoch re = {
        .fit = e, .step = stk_trainer_position(r->trainer)->step, .lr = stk_optim_lr(r->opt)};
    if (r->rank == 0) { /* rank 0 writes the run's record */
        stk_run_memory_read(r->a.device.kind, &re.memory);
        if (re.memory.heap.peak_allocated > r->run_peak)
            r->run_peak = re.memory.heap.peak_allocated;
        STK_TRY(stk_run_record_epoch(r->record, e->epoch, re.step, re.lr, es, e->val, e->val_ema,
                                     &re.memory));
        if (e->confusion)
            STK_TRY(stk_run_record_classes(r->record, e->epoch, e->confusion,
                                           stk_model_get_config(r->model)->classes,
                                           (const char *const *)r->class_list));
    }
    return r->hooks.on_epoch ? r->hooks.on_epoch(r->hooks.ctx, &re, stop) : STK_OK;
}

stk_fit_options stk_run_fit_options(stk_run *r)
{
    const stk_run_settings *a = &r->a;
    stk_fit_options o = stk_fit_defaults();
    o.train = r->loader, o.h2d = r->h2d, o.val = r->val_loader;
    o.val_elsewhere = a->val && r->rank != 0;
    o.epochs = a->epochs, o.stop_after = a->stop_after;
    o.run_dir = a->out, o.write = r->rank == 0;
    o.n_meta = r->n_meta, o.meta_keys = r->meta_keys, o.meta_values = r->meta_values;
    o.early = (stk_early_stop){.patience = (int)a->early_stop,
                               .monitor = (stk_monitor)stk_monitor_parse(a->monitor),
                               .min_delta = a->min_delta,
                               .mode = (stk_mode)a->mode,
                               .start_from_epoch = a->start_from_epoch,
                               .restore_best = a->restore_best};
    o.confusion = r->confusion;
    o.epoch_begin = run_epoch_begin, o.progress = run_progress, o.reduce = run_reduce;
    o.on_epoch = stk_run_epoch_done, o.ctx = r;
    o.eval_label = r->rank == 0 ? r->hooks.eval_label : NULL;
    return o;
}

stk_status stk_run_fit(stk_run *r, stk_run_result *res)
{
    memset(res, 0, sizeof *res);
    res->fit.best_value = NAN;
    res->start_epoch = stk_trainer_position(r->trainer)->epoch;
    double t0 = stk_clock_sec();
    stk_fit_options o = stk_run_fit_options(r);
    stk_status st =
        res->start_epoch < r->a.epochs ? stk_trainer_fit(r->trainer, &o, &res->fit) : STK_OK;
    res->seconds = stk_clock_sec() - t0;
    if (st == STK_ERR_DIVERGED)
        st = stk_error(st,
                       "%s; lower --lr (now %g) or add --warmup-epochs; the last good checkpoint "
                       "is kept in %s",
                       stk_last_error(), r->a.lr, r->a.out);
    double n = res->fit.epochs_run ? (double)res->fit.epochs_run : 1;
    res->epochs = res->start_epoch + res->fit.epochs_run;
    res->images_per_sec = r->ips_sum / n;
    res->stall_pct = r->stall_sum / n;
    res->peak_rss_mb = stk_run_memory_peak_rss_mb();
    res->peak_heap = r->run_peak;
    int64_t frozen;
    stk_model_count(r->model, "", &res->params_trainable, &frozen);
    res->params = res->params_trainable + frozen;
    res->ranks = r->world;
    return st;
}
