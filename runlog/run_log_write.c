/* The run log's writer (run_log.h): metrics.csv and steps.csv, the format
 * that run_log.c reads back. */
#include "runlog/run_log.h"

#include "common/fs.h"
#include "common/text.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_HEADER                                                                             \
    "epoch,step,lr,train_loss,train_acc,val_loss,val_top1,val_top5,images_per_sec,stall_pct,"      \
    "seconds,mem_allocated_mb,mem_reserved_mb,mem_peak_mb,peak_rss_mb,ema_val_loss,ema_val_top1,"  \
    "ema_val_top5\n"
#define STEPS_HEADER "step,epoch,loss,lr,grad_norm\n"

struct stk_run_log_writer {
    char *path_metrics, *path_steps;
    char *metrics; /* metrics.csv's whole text */
    FILE *steps;
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
static stk_status continue_metrics(stk_run_log_writer *r, int64_t resume_epoch)
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
static stk_status continue_steps(stk_run_log_writer *r, int64_t resume_epoch)
{
    uint8_t *text = NULL;
    size_t len = 0;
    stk_status st = stk_file_read_all(r->path_steps, (uint64_t)1 << 32, &text, &len);
    if (st == STK_ERR_IO) { /* a run from before steps.csv: start it here */
        len = 0;
    } else if (st != STK_OK) {
        return stk_error_prefix(st, "%s", r->path_steps);
    }
    size_t keep = 0, rows = 0;
    const char *s = (const char *)text;
    const char *nl = len ? memchr(s, '\n', len) : NULL;
    if (nl) rows = keep = (size_t)(nl - s) + 1; /* the rows start after the header */
    for (size_t at = rows; nl && at < len;) {
        const char *eol = memchr(s + at, '\n', len - at);
        int64_t step, epoch;
        const char *rest;
        if (!eol || !leading_int(s + at, eol, &step, &rest) ||
            !leading_int(rest, eol, &epoch, &rest) || epoch > resume_epoch)
            break;
        at = (size_t)(eol - s) + 1;
        keep = at;
    }
    /* today's header over the old rows (a run from before a column: its
     * rows lack that cell, which reads as empty) */
    stk_file_part parts[2] = {{STEPS_HEADER, strlen(STEPS_HEADER)},
                              {text + rows, keep > rows ? keep - rows : 0}};
    st = stk_file_write_atomic(r->path_steps, parts, 2);
    free(text);
    return st;
}

stk_status stk_run_log_writer_open(const char *dir, int64_t resume_epoch, stk_run_log_writer **out)
{
    *out = NULL;
    stk_run_log_writer *r = calloc(1, sizeof *r);
    if (!r) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = STK_OK;
    if (!(r->path_metrics = stk_text_printf("%s/metrics.csv", dir)) ||
        !(r->path_steps = stk_text_printf("%s/steps.csv", dir))) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
        goto fail;
    }
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
    *out = r;
    return STK_OK;
fail:
    stk_run_log_writer_close(r);
    return st;
}

stk_status stk_run_log_write_step(stk_run_log_writer *r, int64_t step, int64_t epoch, double loss,
                                  double lr, double grad_norm)
{
    int k = isnan(grad_norm) /* an empty cell */
                ? fprintf(r->steps, "%" PRId64 ",%" PRId64 ",%.9g,%.9g\n", step, epoch, loss, lr)
                : fprintf(r->steps, "%" PRId64 ",%" PRId64 ",%.9g,%.9g,%.9g\n", step, epoch, loss,
                          lr, grad_norm);
    if (k < 0) return stk_error(STK_ERR_IO, "%s: %s", r->path_steps, strerror(errno));
    return STK_OK;
}

stk_status stk_run_log_write_epoch(stk_run_log_writer *r, const stk_run_log_row *row)
{
    char v[96] = ",,,", ema[96] = ",,";
    if (row->has_val)
        snprintf(v, sizeof v, "%.5f,%.3f,%.3f,", row->val_loss, row->val_top1, row->val_top5);
    if (row->has_ema)
        snprintf(ema, sizeof ema, ",%.5f,%.3f,%.3f", row->ema_val_loss, row->ema_val_top1,
                 row->ema_val_top5);
    else
        snprintf(ema, sizeof ema, ",,,");
    char *text = stk_text_printf(
        "%s%" PRId64 ",%" PRId64 ",%.6g,%.5f,%.3f,%s%.1f,%.2f,%.2f,%.1f,%.1f,%.1f,%.1f%s\n",
        r->metrics, row->epoch, row->step, row->lr, row->train_loss, row->train_acc, v,
        row->images_per_sec, row->stall_pct, row->seconds, row->mem_allocated_mb,
        row->mem_reserved_mb, row->mem_peak_mb, row->peak_rss_mb, ema);
    if (!text) return stk_error(STK_ERR_NOMEM, "out of memory");
    free(r->metrics);
    r->metrics = text;
    stk_file_part part = {text, strlen(text)};
    STK_TRY(stk_file_write_atomic(r->path_metrics, &part, 1));
    if (fflush(r->steps) != 0)
        return stk_error(STK_ERR_IO, "%s: %s", r->path_steps, strerror(errno));
    return STK_OK;
}

void stk_run_log_writer_close(stk_run_log_writer *r)
{
    if (!r) return;
    if (r->steps) fclose(r->steps);
    free(r->metrics);
    free(r->path_metrics);
    free(r->path_steps);
    free(r);
}
