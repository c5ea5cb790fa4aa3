#include "tools/run_record.h"

#include "common/fs.h"
#include "common/text.h"
#include "engine/tensor.h"
#include "watch/image_grid.h"
#include "watch/tfevents.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define METRICS_HEADER                                                                             \
    "epoch,step,lr,train_loss,train_acc,val_loss,val_top1,val_top5,images_per_sec,stall_pct,"      \
    "seconds,mem_allocated_mb,mem_reserved_mb,mem_peak_mb,peak_rss_mb\n"
#define STEPS_HEADER      "step,epoch,loss,lr\n"
#define FIRST_BATCH_CELLS 64

struct run_record {
    char *path_metrics, *path_steps;
    char *metrics; /* metrics.csv's whole text */
    FILE *steps;
    stk_tfevents *tb;
    float mean[3], std[3];
    bool pictured; /* the first batch is in the event file */
    int64_t epoch; /* of the steps being logged (0-based) */
};

static int count_char(const char *s, size_t n, char c)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == c;
    return k;
}

/* The integer that starts [p, end) and ends at a comma: the first cells of
 * a row, read with an explicit end (the file's bytes have no NUL). */
static bool leading_int(const char *p, const char *end, int64_t *v, const char **after)
{
    bool neg = p < end && *p == '-';
    if (neg) p++;
    const char *digits = p;
    uint64_t x = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (x > ((uint64_t)INT64_MAX - (uint64_t)(*p - '0')) / 10) return false;
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (p == digits || p == end || *p != ',') return false;
    *v = neg ? -(int64_t)x : (int64_t)x;
    *after = p + 1;
    return true;
}

/* metrics.csv of an earlier run, continued: rows up to the checkpoint's
 * epoch, widened to today's columns (a file from before the memory columns
 * gets empty ones). One pass, each kept row appended once: linear time. */
static stk_status continue_metrics(run_record *r, int64_t resume_epoch)
{
    uint8_t *text;
    size_t len;
    stk_status st = stk_file_read_all(r->path_metrics, (uint64_t)1 << 30, &text, &len);
    if (st != STK_OK) return stk_error_prefix(st, "%s", r->path_metrics);
    const char *s = (const char *)text, *end = s + len;
    const char *nl = memchr(s, '\n', len);
    int want = count_char(METRICS_HEADER, strlen(METRICS_HEADER), ',');
    size_t header = strlen(METRICS_HEADER);
    size_t rows = 0;
    for (const char *q = s; q < end && (q = memchr(q, '\n', (size_t)(end - q))); q++) rows++;
    /* at most the file and the commas each row can gain */
    char *out = malloc(header + len + (size_t)want * rows + 1);
    if (!out) {
        free(text);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    memcpy(out, METRICS_HEADER, header);
    size_t n = header;
    for (const char *line = nl ? nl + 1 : end; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) break; /* a torn last line: dropped */
        int64_t epoch;
        const char *rest;
        if (!leading_int(line, eol, &epoch, &rest)) {
            char shown[48];
            snprintf(shown, sizeof shown, "%.*s", (int)(eol - line < 40 ? eol - line : 40), line);
            free(out);
            free(text);
            return stk_error(STK_ERR_CORRUPT, "%s: a row that is not epoch,step,...: %s",
                             r->path_metrics, shown);
        }
        if (epoch <= resume_epoch) {
            int have = count_char(line, (size_t)(eol - line), ',');
            memcpy(out + n, line, (size_t)(eol - line));
            n += (size_t)(eol - line);
            for (int k = have; k < want; k++) out[n++] = ',';
            out[n++] = '\n';
        }
        line = eol + 1;
    }
    out[n] = '\0';
    free(text);
    r->metrics = out;
    return STK_OK;
}

/* steps.csv up to the checkpoint's epoch, rewritten, then appended to. */
static stk_status continue_steps(run_record *r, int64_t resume_epoch)
{
    uint8_t *text = NULL;
    size_t len = 0;
    stk_status st = stk_file_read_all(r->path_steps, (uint64_t)1 << 32, &text, &len);
    if (st == STK_ERR_IO) { /* a run from before steps.csv: start it here */
        len = 0;
    } else if (st != STK_OK) {
        return stk_error_prefix(st, "%s", r->path_steps);
    }
    size_t keep = 0;
    const char *s = (const char *)text;
    const char *nl = len ? memchr(s, '\n', len) : NULL;
    for (size_t at = nl ? (size_t)(nl - s) + 1 : 0; nl && at < len;) {
        const char *eol = memchr(s + at, '\n', len - at);
        int64_t step, epoch;
        const char *rest;
        if (!eol || !leading_int(s + at, eol, &step, &rest) ||
            !leading_int(rest, eol, &epoch, &rest) || epoch > resume_epoch)
            break;
        at = (size_t)(eol - s) + 1;
        keep = at;
    }
    stk_file_part parts[2] = {{STEPS_HEADER, strlen(STEPS_HEADER)}, {NULL, 0}};
    int n = 1;
    if (keep) parts[0] = (stk_file_part){text, keep};
    st = stk_file_write_atomic(r->path_steps, parts, n);
    free(text);
    return st;
}

stk_status run_record_open(const char *dir, bool tensorboard, int64_t resume_epoch,
                           run_record **out)
{
    *out = NULL;
    run_record *r = calloc(1, sizeof *r);
    if (!r) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = STK_OK;
    for (int c = 0; c < 3; c++) r->mean[c] = 0, r->std[c] = 1;
    if (!(r->path_metrics = stk_text_printf("%s/metrics.csv", dir)) ||
        !(r->path_steps = stk_text_printf("%s/steps.csv", dir))) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    r->epoch = resume_epoch;
    if (resume_epoch > 0) {
        if ((st = continue_metrics(r, resume_epoch)) != STK_OK) goto fail;
        if ((st = continue_steps(r, resume_epoch)) != STK_OK) goto fail;
        r->steps = fopen(r->path_steps, "a");
    } else {
        if (!(r->metrics = strdup(METRICS_HEADER))) {
            st = stk_error(STK_ERR_NOMEM, "out of memory");
            goto fail;
        }
        if ((r->steps = fopen(r->path_steps, "w"))) fputs(STEPS_HEADER, r->steps);
    }
    if (!r->steps) {
        st = stk_error(STK_ERR_IO, "%s: %s", r->path_steps, strerror(errno));
        goto fail;
    }
    if (tensorboard && (st = stk_tfevents_open(dir, &r->tb)) != STK_OK) goto fail;
    *out = r;
    return STK_OK;
fail:
    run_record_close(r);
    return st;
}

stk_status run_record_config(run_record *r, const char *markdown)
{
    return r->tb ? stk_tfevents_text(r->tb, "config", 0, markdown) : STK_OK;
}

void run_record_set_normalisation(run_record *r, const float mean[3], const float std[3])
{
    memcpy(r->mean, mean, sizeof r->mean);
    memcpy(r->std, std, sizeof r->std);
}

/* The first training batch as the model sees it (after augmentation). */
static stk_status picture_batch(run_record *r, const stk_step_info *info)
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

stk_status run_record_step_hook(void *ctx, const stk_step_info *info)
{
    run_record *r = ctx;
    if (info->event == STK_STEP_BEFORE_FORWARD) {
        if (r->tb && !r->pictured) {
            r->pictured = true;
            TRY(picture_batch(r, info));
        }
        return STK_OK;
    }
    if (info->event != STK_STEP_AFTER_OPTIMIZER) return STK_OK;
    if (fprintf(r->steps, "%" PRId64 ",%" PRId64 ",%.9g,%.9g\n", info->step + 1, r->epoch + 1,
                (double)info->loss_value, (double)info->lr) < 0)
        return stk_error(STK_ERR_IO, "%s: %s", r->path_steps, strerror(errno));
    if (r->tb) {
        TRY(stk_tfevents_scalar(r->tb, "train/loss", info->step + 1, info->loss_value));
        TRY(stk_tfevents_scalar(r->tb, "train/lr", info->step + 1, info->lr));
    }
    return STK_OK;
}

static stk_status epoch_scalars(run_record *r, int64_t e, const stk_epoch_stats *es,
                                const stk_eval_result *val, const run_memory *m)
{
    stk_tfevents *tb = r->tb;
    TRY(stk_tfevents_scalar(tb, "epoch/train_loss", e, (float)es->loss));
    TRY(stk_tfevents_scalar(tb, "epoch/train_acc", e, (float)es->accuracy));
    if (val) {
        TRY(stk_tfevents_scalar(tb, "epoch/val_loss", e, (float)val->loss));
        TRY(stk_tfevents_scalar(tb, "epoch/val_top1", e, (float)val->top1));
        TRY(stk_tfevents_scalar(tb, "epoch/val_top5", e, (float)val->top5));
    }
    TRY(stk_tfevents_scalar(tb, "epoch/images_per_sec", e, (float)es->images_per_sec));
    TRY(stk_tfevents_scalar(tb, "epoch/stall_pct", e, (float)es->stall_pct));
    const stk_mem_stats *heaps[2] = {&m->heap, m->device == STK_DEVICE_CUDA ? &m->cpu_heap : NULL};
    const char *names[2] = {stk_device_name(m->device), "cpu"};
    for (int i = 0; i < 2 && heaps[i]; i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "memory/%s_allocated_mb", names[i]);
        TRY(stk_tfevents_scalar(tb, tag, e, (float)(heaps[i]->allocated / 1e6)));
        snprintf(tag, sizeof tag, "memory/%s_reserved_mb", names[i]);
        TRY(stk_tfevents_scalar(tb, tag, e, (float)(heaps[i]->reserved / 1e6)));
        snprintf(tag, sizeof tag, "memory/%s_peak_mb", names[i]);
        TRY(stk_tfevents_scalar(tb, tag, e, (float)(heaps[i]->peak_allocated / 1e6)));
    }
    TRY(stk_tfevents_scalar(tb, "memory/peak_rss_mb", e, (float)m->peak_rss_mb));
    return stk_tfevents_flush(tb);
}

stk_status run_record_epoch(run_record *r, int64_t epoch, int64_t step, double lr,
                            const stk_epoch_stats *es, const stk_eval_result *val,
                            const run_memory *m)
{
    char v[96] = ",,,";
    if (val) snprintf(v, sizeof v, "%.5f,%.3f,%.3f,", val->loss, val->top1, val->top5);
    char *text = stk_text_printf(
        "%s%" PRId64 ",%" PRId64 ",%.6g,%.5f,%.3f,%s%.1f,%.2f,%.2f,%.1f,%.1f,%.1f,%.1f\n",
        r->metrics, epoch + 1, step, lr, es->loss, es->accuracy, v, es->images_per_sec,
        es->stall_pct, es->seconds, m->heap.allocated / 1e6, m->heap.reserved / 1e6,
        m->heap.peak_allocated / 1e6, m->peak_rss_mb);
    if (!text) return stk_error(STK_ERR_NOMEM, "out of memory");
    free(r->metrics);
    r->metrics = text;
    stk_file_part part = {text, strlen(text)};
    TRY(stk_file_write_atomic(r->path_metrics, &part, 1));
    if (fflush(r->steps) != 0)
        return stk_error(STK_ERR_IO, "%s: %s", r->path_steps, strerror(errno));
    r->epoch = epoch + 1; /* the steps logged next belong to the next epoch */
    return r->tb ? epoch_scalars(r, epoch + 1, es, val, m) : STK_OK;
}

const char *run_record_tensorboard_path(const run_record *r)
{
    return r->tb ? stk_tfevents_path(r->tb) : NULL;
}

void run_record_close(run_record *r)
{
    if (!r) return;
    if (r->steps) fclose(r->steps);
    stk_tfevents_close(r->tb);
    free(r->metrics);
    free(r->path_metrics);
    free(r->path_steps);
    free(r);
}

void run_memory_read(stk_device device, run_memory *m)
{
    memset(m, 0, sizeof *m);
    m->device = device;
    stk_device_mem_stats(device, &m->heap);
    if (device == STK_DEVICE_CUDA) stk_device_mem_stats(STK_DEVICE_CPU, &m->cpu_heap);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    m->peak_rss_mb = ru.ru_maxrss / 1024.0;
}
