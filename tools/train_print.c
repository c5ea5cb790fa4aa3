/* What `stoke train` prints and records as the run goes (train_print.h). */
#include "tools/train_print.h"

#include "common/json.h"
#include "common/memory_budget.h"
#include "kernels/backend.h"
#include "tools/cli.h"
#include "storage/dataset.h"
#include "tools/flags.h"
#include "tools/memory_report.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void say(FILE *f, const char *fmt, ...)
{
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
}

static stk_status train_epoch_begin(void *ctx, int64_t epoch)
{
    train_printer *p = ctx;
    char label[32];
    snprintf(label, sizeof label, "epoch %" PRId64 "/%" PRId64, epoch + 1, p->r->a.epochs);
    stk_progress_init(&p->bar, label, stk_loader_batches(p->r->loader), p->r->rank ? NULL : stderr);
    return STK_OK;
}

static stk_status train_progress(void *ctx, const stk_epoch_stats *es)
{
    train_printer *p = ctx;
    char extra[96];
    snprintf(extra, sizeof extra, "loss %.4f  %.0f img/s  stall %.1f%%", es->loss,
             es->images_per_sec, es->stall_pct);
    stk_progress_set_extra(&p->bar, extra);
    stk_progress_update(&p->bar, es->steps);
    return STK_OK;
}

static void train_epoch_end(void *ctx)
{
    train_printer *p = ctx;
    stk_progress_finish(&p->bar);
}

/* Rank 0's, where the epoch lines go (said while the run opens). */
static void train_notice(void *ctx, const char *line)
{
    train_printer *p = ctx;
    fprintf(p->r->a.json ? stderr : stdout, "%s\n", line);
}

/* A newcomer's first run at a small batch and a high --lr can evaluate at
 * losses many times the training loss: eval mode uses batch norm's running
 * statistics, which lag the weights. Said once a run, on stderr. */
static void warn_eval_far_above(train_printer *p, const stk_fit_epoch *e)
{
    uint32_t classes = stk_model_get_config(p->r->model)->classes;
    double chance = log(classes > 1 ? (double)classes : 2.0);
    if (p->warned_eval || !e->val || !(e->val->loss > 4 * e->train->loss) ||
        !(e->val->loss > 2 * chance))
        return;
    p->warned_eval = true;
    fprintf(stderr,
            "stoke: warning: epoch %" PRId64 ": validation loss %.4g is far above the training "
            "loss %.4g. Evaluation uses batch norm's running statistics, which lag the weights "
            "early in a run or at a high --lr (now %g); if it lasts, lower --lr, raise --batch or "
            "add --warmup-epochs\n",
            e->epoch + 1, e->val->loss, e->train->loss, p->r->a.lr);
}

/* The epoch line (rank 0), after the run recorded the epoch. */
static stk_status train_on_epoch(void *ctx, const stk_run_epoch *re, bool *stop)
{
    train_printer *p = ctx;
    stk_run *r = p->r;
    const stk_fit_epoch *e = re->fit;
    const stk_epoch_stats *es = e->train;
    const stk_run_memory mem = re->memory;
    (void)stop;
    if (!p->lines) return STK_OK;
    say(p->lines, "epoch %" PRId64 "/%" PRId64 ": loss %.4f, train acc %.2f%%", e->epoch + 1,
        r->a.epochs, es->loss, es->accuracy);
    if (e->val)
        say(p->lines, ", val loss %.4f, top-1 %.2f%%, top-5 %.2f%%", e->val->loss, e->val->top1,
            e->val->top5);
    if (e->val_ema)
        say(p->lines, ", ema val loss %.4f, top-1 %.2f%%", e->val_ema->loss, e->val_ema->top1);
    say(p->lines,
        ", %.0f images/s, stall %.1f%%, %.1f s, %s memory %.0f MB (peak %.0f), rss %.0f MB%s\n",
        es->images_per_sec, es->stall_pct, es->seconds, stk_device_name(r->a.device.kind),
        mem.heap.allocated / 1e6, mem.heap.peak_allocated / 1e6, mem.peak_rss_mb,
        e->improved ? " *" : "");
    warn_eval_far_above(p, e);
    return STK_OK;
}

stk_run_hooks train_hooks(train_printer *p)
{
    return (stk_run_hooks){.epoch_begin = train_epoch_begin,
                           .progress = train_progress,
                           .epoch_end = train_epoch_end,
                           .on_epoch = train_on_epoch,
                           .notice = train_notice,
                           .eval_label = "eval",
                           .ctx = p,
                           .cancel = &stk_cli_interrupted};
}

void train_print_dropped(FILE *f, const stk_run *r)
{
    uint64_t total = stk_dataset_count(stk_loader_dataset(r->loader));
    uint64_t used = stk_loader_samples(r->loader) * (uint64_t)r->data_world;
    if (!f || used >= total || (total - used) * 20 <= total) return; /* 5% or less */
    say(f,
        "note: batch %" PRId64 "%s leaves out %" PRIu64 " of the %" PRIu64 " images (%.1f%%) "
        "each epoch: the last, partial batch is dropped; a batch that divides the images "
        "wastes none\n",
        r->a.batch, r->data_world > 1 ? " per replica" : "", total - used, total,
        100.0 * (double)(total - used) / (double)total);
}

/* 11181642 -> "11,181,642" */
static const char *grouped(int64_t v, char buf[32])
{
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%" PRId64, v < 0 ? -v : v), k = 0;
    if (v < 0) buf[k++] = '-';
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) buf[k++] = ',';
        buf[k++] = digits[i];
    }
    buf[k] = '\0';
    return buf;
}

/* "N (T trainable, F frozen)", or "N trainable" / "N frozen" when all are one. */
static void say_split(FILE *f, int64_t trainable, int64_t frozen)
{
    char a[32], b[32], c[32];
    if (!frozen || !trainable)
        say(f, "%s %s", grouped(trainable + frozen, a), frozen ? "frozen" : "trainable");
    else
        say(f, "%s (%s trainable, %s frozen)", grouped(trainable + frozen, a),
            grouped(trainable, b), grouped(frozen, c));
}

void train_print_params(FILE *f, const stk_model *m, bool per_module)
{
    int64_t trainable, frozen;
    stk_model_count(m, "", &trainable, &frozen);
    say(f, "parameters: ");
    say_split(f, trainable, frozen);
    say(f, "\n");
    if (!per_module) return;
    /* the top-level modules in order of their first parameter */
    for (int i = 0; i < stk_model_param_count(m); i++) {
        const stk_param *p = stk_model_param(m, i);
        if (p->is_buffer) continue;
        size_t len = strcspn(p->name, ".");
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) {
            const stk_param *q = stk_model_param(m, j);
            seen = !q->is_buffer && strcspn(q->name, ".") == len && !strncmp(q->name, p->name, len);
        }
        if (seen) continue;
        char top[64];
        snprintf(top, sizeof top, "%.*s", (int)(len < 63 ? len : 63), p->name);
        stk_model_count(m, top, &trainable, &frozen);
        say(f, "  %-10s ", top);
        say_split(f, trainable, frozen);
        say(f, "\n");
    }
}

void train_print_memory(FILE *f, const stk_run *r)
{
    if (r->a.device.kind != STK_DEVICE_CPU) return;
    const stk_memory_estimate *e = &r->memory;
    uint64_t need = stk_memory_estimate_at(e, r->a.batch) + r->ring_bytes;
    char why[128];
    uint64_t budget = stk_memory_budget(why, sizeof why);
    say(f,
        "memory: about %.0f MB at batch %" PRId64 " (%.0f MB + %.1f MB per image, loader %.0f MB)",
        need / 1e6, r->a.batch, e->fixed / 1e6, e->per_image / 1e6, r->ring_bytes / 1e6);
    if (!budget) {
        say(f, "\n");
        return;
    }
    say(f, "; %s allows %.0f MB\n", why, budget / 1e6);
    /* a tenth kept for the process itself: libraries, the loader's workers */
    uint64_t room = budget - budget / 10;
    if (need <= room) return;
    int64_t fits = stk_memory_estimate_batch(e, room > r->ring_bytes ? room - r->ring_bytes : 0);
    if (fits >= 1)
        fprintf(stderr,
                "stoke: warning: this run needs about %.0f MB, more than the %.0f MB %s allows "
                "(less a tenth): it may be killed for memory; --batch %" PRId64
                " would fit (or a smaller image size)\n",
                need / 1e6, budget / 1e6, why, fits > r->a.batch ? r->a.batch : fits);
    else
        fprintf(stderr,
                "stoke: warning: this run needs about %.0f MB, more than the %.0f MB %s allows "
                "(less a tenth), even at batch 1: train at a smaller image size\n",
                need / 1e6, budget / 1e6, why);
}

void train_print_summary(train_printer *p, const stk_run_result *res)
{
    stk_run *r = p->r;
    const stk_run_settings *a = &r->a;
    const stk_fit_result *f = &res->fit;
    if (a->json && r->rank == 0) {
        char j[8][STK_JSON_NUMBER];
        printf("{\"params\": %" PRId64 ", \"params_trainable\": %" PRId64 ", ", res->params,
               res->params_trainable);
        printf("\"epochs\": %" PRId64 ", \"val_top1\": %s, \"val_top5\": %s, \"val_loss\": %s, "
               "\"train_images_per_sec\": %s, \"stall_pct\": %s, \"seconds\": %s, "
               "\"peak_rss_mb\": %s, \"ranks\": %d, \"stopped_epoch\": %" PRId64
               ", \"best_epoch\": %" PRId64 ", \"monitor\": \"%s\", \"best_value\": %s, "
               "\"stop_reason\": \"%s\"}\n",
               res->epochs, stk_json_number(f->val.top1, 4, j[0]),
               stk_json_number(f->val.top5, 4, j[1]), stk_json_number(f->val.loss, 6, j[2]),
               stk_json_number(res->images_per_sec, 1, j[3]),
               stk_json_number(res->stall_pct, 2, j[4]), stk_json_number(res->seconds, 2, j[5]),
               stk_json_number(res->peak_rss_mb, 1, j[6]), res->ranks, f->stopped_epoch,
               f->best_epoch, a->monitor, stk_json_number(f->best_value, 6, j[7]),
               stk_fit_stop_name(f->reason));
    } else if (f->epochs_run) {
        say(p->lines,
            "done: %" PRId64 " epochs in %.1f s, %.0f images/s, stall %.1f%%; checkpoints in %s\n"
            "stopped_epoch %" PRId64 ", best_epoch %" PRId64 " (%s %.6g), stop_reason %s%s\n",
            f->epochs_run, res->seconds, res->images_per_sec, res->stall_pct, a->out,
            f->stopped_epoch, f->best_epoch, a->monitor, f->best_value,
            stk_fit_stop_name(f->reason),
            a->restore_best && f->best_epoch ? " (the best epoch's weights restored)" : "");
    }
    uint32_t classes = stk_model_get_config(r->model)->classes;
    double chance = 100.0 / (classes ? classes : 1);
    if (a->restore_best && a->val && f->best_epoch && r->rank == 0 && f->epochs_run &&
        f->best_val.top1 <= 1.5 * chance)
        fprintf(stderr,
                "stoke: warning: --restore-best restored epoch %" PRId64 ", whose validation "
                "top-1 %.2f%% is at chance level (%.1f%% for %u classes): no epoch learned "
                "anything to keep; see the epoch lines above\n",
                f->best_epoch, f->best_val.top1, chance, classes);
    if (r->ddp && r->rank == 0) { /* on stderr: --json keeps stdout one object */
        stk_ddp_stats ds;
        stk_ddp_get_stats(r->ddp, &ds);
        fprintf(stderr,
                "data-parallel: %.1f MB of gradients all-reduced per step in %d buckets by %s; "
                "all-reduce %.2f s over %" PRIu64 " steps, %.2f s of it not hidden by backward\n",
                ds.bytes_per_step / 1e6, ds.buckets, ds.library, ds.comm_s, ds.steps, ds.exposed_s);
    }
    if (a->memory_report && r->rank == 0)
        memory_report_print(stderr, a->device.kind, res->peak_heap);
    if (a->amp && r->rank == 0 && a->device.kind != STK_DEVICE_CUDA)
        fprintf(stderr, "amp: matmuls and convolutions in bf16 on %s, no loss scaling\n",
                stk_cpu_bf16_isa());
    else if (a->amp && r->rank == 0)
        fprintf(stderr,
                "amp: %" PRId64 " of %" PRId64 " steps skipped for inf/NaN gradients, loss "
                "scale now %g\n",
                stk_trainer_skipped_steps(r->trainer), stk_trainer_position(r->trainer)->step,
                (double)stk_trainer_loss_scale(r->trainer));
}

/* A TOML basic string: the quotes, backslashes and line breaks escaped. */
static void toml_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) switch (*s) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default: fputc(*s, f);
        }
    fputc('"', f);
}

void train_print_config(FILE *f, const stk_cli *c, const stk_run_settings *a)
{
    char v[4096];
    for (const stk_flag *fl = c->flags; fl->kind != STK_FLAG_KIND_END; fl++) {
        if (fl->kind == STK_FLAG_KIND_SECTION) {
            fprintf(f, "%s# %s\n", fl == c->flags ? "" : "\n", fl->name);
            continue;
        }
        if (!strcmp(fl->name, "config") || !strcmp(fl->name, "print-config") ||
            !stk_flag_value_text(fl, a, v, sizeof v))
            continue;
        fprintf(f, "%s = ", fl->name);
        switch (fl->kind) {
        case STK_FLAG_KIND_BOOL: fputs(strcmp(v, "yes") ? "false" : "true", f); break;
        case STK_FLAG_KIND_INT:
        case STK_FLAG_KIND_NUMBER: fputs(v, f); break;
        case STK_FLAG_KIND_LIST: {
            int n = *(const int *)((const char *)a + fl->count_offset);
            fputc('[', f);
            for (int i = 0; i < n; i++) {
                if (i) fputs(", ", f);
                toml_string(f, ((const char *const *)((const char *)a + fl->offset))[i]);
            }
            fputc(']', f);
            break;
        }
        default: toml_string(f, v);
        }
        fputc('\n', f);
    }
}

void train_print_start(train_printer *p, int64_t start)
{
    const stk_run *r = p->r;
    const stk_run_settings *a = &r->a;
    if (start >= a->epochs)
        say(p->lines, "%s: already trained for %" PRId64 " epochs\n", r->path_last, start);
    else
        say(p->lines,
            "train %s on %s: %" PRId64 " epochs of %" PRId64 " steps, batch %" PRId64
            ", %s lr %g, transform %s%s\n",
            a->model, a->data, a->epochs - start, (int64_t)stk_loader_batches(r->loader), a->batch,
            stk_optim_kind_name((stk_optim_kind)a->optimizer), a->lr, r->transform,
            start ? " (resumed)" : "");
    train_print_dropped(p->lines, r);
    train_print_params(p->lines, r->model, a->n_freeze > 0);
    train_print_memory(p->lines, r);
    const stk_pipeline *pipe = stk_trainer_pipeline(r->trainer);
    char stages[1024];
    if (pipe && a->pipeline > 1)
        say(p->lines, "pipeline: %" PRId64 " stages (%s), %" PRId64 " micro-batches a step; %s\n",
            a->pipeline, stk_pipe_schedule_name((stk_pipe_schedule)a->pipeline_schedule),
            a->micro_batches, stk_pipeline_describe(pipe, stages, sizeof stages));
    else if (pipe)
        say(p->lines, "micro-batches: %" PRId64 " a step, gradients accumulated\n",
            a->micro_batches);
    if (r->world > 1 && r->pipe_ranks)
        say(p->lines,
            "pipelines on ranks: %d ranks (%s) = %d pipeline%s x %" PRId64
            " stages (rank = pipeline x %" PRId64 " + stage), batch %" PRId64
            " per pipeline, global batch %" PRId64 "; images/s below are the job's\n",
            r->world, stk_comm_library(r->comm), r->data_world, r->data_world == 1 ? "" : "s",
            a->pipeline, a->pipeline, a->batch, a->batch * r->data_world);
    else if (r->world > 1)
        say(p->lines,
            "data-parallel: %d ranks (%s), batch %" PRId64 " per rank, global batch %" PRId64
            "%s; images/s below are the job's\n",
            r->world, stk_comm_library(r->comm), a->batch, a->batch * r->world,
            a->sync_bn ? ", batch norm synchronised" : "");
}
