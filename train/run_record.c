/* A run's record (run_record.h): the run log through its writer, the
 * TensorBoard event file, the memory figures. */
#include "train/run_record.h"

#include "common/fs.h"
#include "common/text.h"
#include "engine/tensor.h"
#include "runlog/class_report.h"
#include "runlog/confusion_image.h"
#include "runlog/image_grid.h"
#include "runlog/run_log.h"
#include "runlog/tfevents.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define FIRST_BATCH_CELLS 64

struct stk_run_record {
    stk_run_log_writer *log; /* metrics.csv, steps.csv */
    stk_tfevents *tb;
    float mean[3], std[3];
    bool pictured; /* the first batch is in the event file */
    int64_t epoch; /* of the steps being logged (0-based) */
};

stk_status stk_run_record_open(const char *dir, bool tensorboard, int64_t resume_epoch,
                               stk_run_record **out)
{
    *out = NULL;
    stk_run_record *r = calloc(1, sizeof *r);
    if (!r) return stk_error(STK_ERR_NOMEM, "out of memory");
    for (int c = 0; c < 3; c++) r->mean[c] = 0, r->std[c] = 1;
    r->epoch = resume_epoch;
    stk_status st = stk_run_log_writer_open(dir, resume_epoch, &r->log);
    if (st == STK_OK && tensorboard) st = stk_tfevents_open(dir, &r->tb);
    if (st != STK_OK) {
        stk_run_record_close(r);
        return st;
    }
    *out = r;
    return STK_OK;
}

stk_status stk_run_record_config(stk_run_record *r, const char *markdown)
{
    return r->tb ? stk_tfevents_text(r->tb, "config", 0, markdown) : STK_OK;
}

void stk_run_record_set_normalisation(stk_run_record *r, const float mean[3], const float std[3])
{
    memcpy(r->mean, mean, sizeof r->mean);
    memcpy(r->std, std, sizeof r->std);
}

/* The first training batch as the model sees it (after augmentation). */
static stk_status picture_batch(stk_run_record *r, const stk_step_info *info)
{
    const stk_tensor *x = info->input;
    int n = (int)stk_tensor_dim(x, 0), c = (int)stk_tensor_dim(x, 1);
    int h = (int)stk_tensor_dim(x, 2), w = (int)stk_tensor_dim(x, 3);
    size_t bytes = (size_t)n * (size_t)c * (size_t)h * (size_t)w * sizeof(float);
    float *host = malloc(bytes);
    if (!host) return stk_error(STK_ERR_NOMEM, "no memory for the first batch's picture");
    uint8_t *px = NULL;
    int gw, gh;
    stk_status st = stk_tensor_to_host(x, host, bytes);
    if (st == STK_OK)
        st = stk_image_grid_nchw(host, n, c, h, w, r->mean, r->std, FIRST_BATCH_CELLS, &px, &gw,
                                 &gh);
    if (st == STK_OK)
        st = stk_tfevents_image(r->tb, "train/first_batch", info->step, px, gw, gh, c);
    free(host);
    free(px);
    return st;
}

stk_status stk_run_record_step_hook(void *ctx, const stk_step_info *info)
{
    stk_run_record *r = ctx;
    if (info->event == STK_STEP_BEFORE_FORWARD) {
        if (r->tb && !r->pictured) {
            r->pictured = true;
            STK_TRY(picture_batch(r, info));
        }
        return STK_OK;
    }
    if (info->event != STK_STEP_AFTER_OPTIMIZER) return STK_OK;
    STK_TRY(stk_run_log_write_step(r->log, info->step + 1, r->epoch + 1, (double)info->loss_value,
                                   (double)info->lr, (double)info->grad_norm));
    if (r->tb) {
        STK_TRY(stk_tfevents_scalar(r->tb, "train/loss", info->step + 1, info->loss_value));
        STK_TRY(stk_tfevents_scalar(r->tb, "train/lr", info->step + 1, info->lr));
        if (!isnan(info->grad_norm))
            STK_TRY(stk_tfevents_scalar(r->tb, "train/grad_norm", info->step + 1, info->grad_norm));
    }
    return STK_OK;
}

static stk_status epoch_scalars(stk_run_record *r, int64_t e, const stk_epoch_stats *es,
                                const stk_eval_result *val, const stk_eval_result *val_ema,
                                const stk_run_memory *m)
{
    stk_tfevents *tb = r->tb;
    STK_TRY(stk_tfevents_scalar(tb, "epoch/train_loss", e, (float)es->loss));
    STK_TRY(stk_tfevents_scalar(tb, "epoch/train_acc", e, (float)es->accuracy));
    if (val) {
        STK_TRY(stk_tfevents_scalar(tb, "epoch/val_loss", e, (float)val->loss));
        STK_TRY(stk_tfevents_scalar(tb, "epoch/val_top1", e, (float)val->top1));
        STK_TRY(stk_tfevents_scalar(tb, "epoch/val_top5", e, (float)val->top5));
    }
    if (val_ema) {
        STK_TRY(stk_tfevents_scalar(tb, "epoch/ema_val_loss", e, (float)val_ema->loss));
        STK_TRY(stk_tfevents_scalar(tb, "epoch/ema_val_top1", e, (float)val_ema->top1));
        STK_TRY(stk_tfevents_scalar(tb, "epoch/ema_val_top5", e, (float)val_ema->top5));
    }
    STK_TRY(stk_tfevents_scalar(tb, "epoch/images_per_sec", e, (float)es->images_per_sec));
    STK_TRY(stk_tfevents_scalar(tb, "epoch/stall_pct", e, (float)es->stall_pct));
    const stk_mem_stats *heaps[2] = {&m->heap, m->device == STK_DEVICE_CUDA ? &m->cpu_heap : NULL};
    const char *names[2] = {stk_device_name(m->device), "cpu"};
    for (int i = 0; i < 2 && heaps[i]; i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "memory/%s_allocated_mb", names[i]);
        STK_TRY(stk_tfevents_scalar(tb, tag, e, (float)(heaps[i]->allocated / 1e6)));
        snprintf(tag, sizeof tag, "memory/%s_reserved_mb", names[i]);
        STK_TRY(stk_tfevents_scalar(tb, tag, e, (float)(heaps[i]->reserved / 1e6)));
        snprintf(tag, sizeof tag, "memory/%s_peak_mb", names[i]);
        STK_TRY(stk_tfevents_scalar(tb, tag, e, (float)(heaps[i]->peak_allocated / 1e6)));
    }
    STK_TRY(stk_tfevents_scalar(tb, "memory/peak_rss_mb", e, (float)m->peak_rss_mb));
    return stk_tfevents_flush(tb);
}

stk_status stk_run_record_classes(stk_run_record *r, int64_t epoch, const uint64_t *confusion,
                                  int classes, const char *const *names)
{
    if (!r->tb) return STK_OK;
    char *md = stk_class_report_markdown(confusion, classes, names);
    if (!md) return stk_error(STK_ERR_NOMEM, "out of memory for the per-class table");
    stk_status st = stk_tfevents_text(r->tb, "eval/per_class", epoch + 1, md);
    free(md);
    uint8_t *rgb = NULL;
    int w, h;
    if (st == STK_OK &&
        (st = stk_confusion_image(confusion, classes, names, &rgb, &w, &h)) == STK_OK)
        st = stk_tfevents_image(r->tb, "eval/confusion", epoch + 1, rgb, w, h, 3);
    free(rgb);
    return st;
}

stk_status stk_run_record_epoch(stk_run_record *r, int64_t epoch, int64_t step, double lr,
                                const stk_epoch_stats *es, const stk_eval_result *val,
                                const stk_eval_result *val_ema, const stk_run_memory *m)
{
    stk_run_log_row row = {.epoch = epoch + 1,
                           .step = step,
                           .lr = lr,
                           .train_loss = es->loss,
                           .train_acc = es->accuracy,
                           .has_val = val != NULL,
                           .val_loss = val ? val->loss : 0,
                           .val_top1 = val ? val->top1 : 0,
                           .val_top5 = val ? val->top5 : 0,
                           .images_per_sec = es->images_per_sec,
                           .stall_pct = es->stall_pct,
                           .seconds = es->seconds,
                           .mem_allocated_mb = m->heap.allocated / 1e6,
                           .mem_reserved_mb = m->heap.reserved / 1e6,
                           .mem_peak_mb = m->heap.peak_allocated / 1e6,
                           .peak_rss_mb = m->peak_rss_mb,
                           .has_ema = val_ema != NULL,
                           .ema_val_loss = val_ema ? val_ema->loss : 0,
                           .ema_val_top1 = val_ema ? val_ema->top1 : 0,
                           .ema_val_top5 = val_ema ? val_ema->top5 : 0};
    STK_TRY(stk_run_log_write_epoch(r->log, &row));
    r->epoch = epoch + 1; /* the steps logged next belong to the next epoch */
    return r->tb ? epoch_scalars(r, epoch + 1, es, val, val_ema, m) : STK_OK;
}

const char *stk_run_record_tensorboard_path(const stk_run_record *r)
{
    return r->tb ? stk_tfevents_path(r->tb) : NULL;
}

void stk_run_record_close(stk_run_record *r)
{
    if (!r) return;
    stk_run_log_writer_close(r->log);
    stk_tfevents_close(r->tb);
    free(r);
}

void stk_run_memory_read(stk_device device, stk_run_memory *m)
{
    memset(m, 0, sizeof *m);
    m->device = device;
    stk_device_mem_stats(device, &m->heap);
    if (device == STK_DEVICE_CUDA) stk_device_mem_stats(STK_DEVICE_CPU, &m->cpu_heap);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    m->peak_rss_mb = ru.ru_maxrss / 1024.0;
}

double stk_run_memory_peak_rss_mb(void)
{
    stk_run_memory m;
    stk_run_memory_read(STK_DEVICE_CPU, &m);
    return m.peak_rss_mb;
}
