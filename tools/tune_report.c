/* What a sweep writes (tune_sweep.h): trials.csv, best.json,
 * best.safetensors, each trial's params.json, and the ranked summary. */
#include "tools/tune_sweep.h"

#include "common/fs.h"
#include "common/json.h"
#include "common/text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* The text `fill` writes to a memory stream, written atomically to path. */
static stk_status write_text(const char *path, void (*fill)(FILE *, const void *), const void *ctx)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return stk_error(STK_ERR_NOMEM, "out of memory");
    fill(f, ctx);
    if (fclose(f) != 0) {
        free(buf);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    stk_file_part part = {buf, len};
    stk_status st = stk_file_write_atomic(path, &part, 1);
    free(buf);
    return st;
}

/* {"lr": "0.01", ...}: the values as the text passed to stoke train */
static void params_object(FILE *f, const tune_trial *t)
{
    fputs("{", f);
    for (int k = 0; k < t->params.n; k++) {
        fputs(k ? ", " : "", f);
        stk_json_write_string(f, t->params.key[k]);
        fputs(": ", f);
        stk_json_write_string(f, t->params.value[k]);
    }
    fputs("}", f);
}

static void params_json(FILE *f, const void *ctx)
{
    params_object(f, ctx);
    fputs("\n", f);
}

stk_status tune_write_params(const tune_trial *t)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/params.json", t->out);
    return write_text(path, params_json, t);
}

typedef struct results {
    const tune_config *c;
    const tune_trial *trials;
    int64_t n;
} results;

static void trials_csv(FILE *f, const void *ctx)
{
    const results *r = ctx;
    const stk_space *sp = &r->c->space;
    fputs("trial,status", f);
    for (int k = 0; k < sp->n; k++) fprintf(f, ",%s", sp->keys[k].name);
    fprintf(f, ",best_%s,best_epoch,epochs_run,seconds,error,command\n",
            stk_monitor_name(r->c->metric));
    for (int64_t i = 0; i < r->n; i++) {
        const tune_trial *t = &r->trials[i];
        char st[32], v[32];
        tune_status_text(t, st);
        fprintf(f, "%04" PRId64 ",%s", t->id, st);
        for (int k = 0; k < t->params.n; k++) {
            fputc(',', f);
            csv_field(f, t->params.value[k]);
        }
        stk_number_text(t->best_value, v);
        fprintf(f, ",%s,%" PRId64 ",%" PRId64 ",%.1f,", isnan(t->best_value) ? "" : v,
                t->best_epoch, t->epochs_run, t->seconds);
        csv_field(f, t->error);
        fputc(',', f);
        csv_field(f, t->command ? t->command : "");
        fputc('\n', f);
    }
}

/* The best trial: the best metric (ties: the lower id); NULL when none has one. */
static const tune_trial *best_trial(const tune_config *c, const tune_trial *trials, int64_t n)
{
    const tune_trial *b = NULL;
    for (int64_t i = 0; i < n; i++) {
        const tune_trial *t = &trials[i];
        if (isnan(t->best_value)) continue;
        if (!b || (c->maximise ? t->best_value > b->best_value : t->best_value < b->best_value))
            b = t;
    }
    return b;
}

static void best_json(FILE *f, const void *ctx)
{
    const results *r = ctx;
    const tune_trial *b = best_trial(r->c, r->trials, r->n);
    char id[16], num[STK_JSON_NUMBER], ckpt[1200];
    snprintf(id, sizeof id, "%04" PRId64, b->id);
    snprintf(ckpt, sizeof ckpt, "%s/best.safetensors", b->out);
    fputs("{\"trial\": ", f);
    stk_json_write_string(f, id);
    fputs(", \"params\": ", f);
    params_object(f, b);
    fprintf(f, ", \"metric\": {\"name\": \"%s\", \"value\": %s, \"epoch\": %" PRId64 "}",
            stk_monitor_name(r->c->metric), stk_json_number(b->best_value, 6, num), b->best_epoch);
    fputs(", \"checkpoint\": ", f);
    stk_json_write_string(f, ckpt);
    fputs(", \"command\": ", f);
    stk_json_write_string(f, b->command);
    fputs("}\n", f);
}

/* best.safetensors: a copy of the best trial's best.safetensors (the
 * weights of its best epoch by its --monitor, as `stoke train` keeps). */
static stk_status copy_best(const tune_config *c, const tune_trial *b)
{
    char from[1200], to[1100];
    snprintf(from, sizeof from, "%s/best.safetensors", b->out);
    snprintf(to, sizeof to, "%s/best.safetensors", c->out);
    uint8_t *data;
    size_t len;
    stk_status st = stk_file_read_all(from, UINT64_MAX, &data, &len);
    if (st != STK_OK) return st;
    stk_file_part part = {data, len};
    st = stk_file_write_atomic(to, &part, 1);
    free(data);
    return st;
}

stk_status tune_write_results(const tune_config *c, const tune_trial *trials, int64_t n)
{
    results r = {c, trials, n};
    char path[1100];
    snprintf(path, sizeof path, "%s/trials.csv", c->out);
    STK_TRY(write_text(path, trials_csv, &r));
    const tune_trial *b = best_trial(c, trials, n);
    if (!b) return STK_OK;
    snprintf(path, sizeof path, "%s/best.json", c->out);
    STK_TRY(write_text(path, best_json, &r));
    return copy_best(c, b);
}

static int by_metric_desc = 1;
static const tune_trial *sort_base;

static int rank_cmp(const void *a, const void *b)
{
    const tune_trial *x = &sort_base[*(const int64_t *)a], *y = &sort_base[*(const int64_t *)b];
    bool nx = isnan(x->best_value), ny = isnan(y->best_value);
    if (nx != ny) return nx ? 1 : -1;
    if (!nx && x->best_value != y->best_value)
        return (x->best_value < y->best_value) == (by_metric_desc > 0) ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void tune_print_summary(const tune_config *c, const tune_trial *trials, int64_t n, FILE *f,
                        bool json, double seconds)
{
    int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order) return;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    sort_base = trials;
    by_metric_desc = c->maximise ? 1 : -1;
    qsort(order, (size_t)n, sizeof *order, rank_cmp);
    const tune_trial *b = n ? &trials[order[0]] : NULL;
    int64_t counts[5] = {0};
    for (int64_t i = 0; i < n; i++) counts[trials[i].status]++;
    if (json) {
        char num[STK_JSON_NUMBER];
        fprintf(f,
                "{\"trials\": %" PRId64 ", \"completed\": %" PRId64 ", \"stopped\": %" PRId64
                ", \"early_stopped\": %" PRId64 ", \"errors\": %" PRId64 ", \"seconds\": %.1f",
                n, counts[TRIAL_COMPLETED], counts[TRIAL_STOPPED], counts[TRIAL_EARLY_STOPPED],
                counts[TRIAL_ERROR], seconds);
        if (b && !isnan(b->best_value))
            fprintf(f, ", \"best_trial\": \"%04" PRId64 "\", \"best_%s\": %s", b->id,
                    stk_monitor_name(c->metric), stk_json_number(b->best_value, 6, num));
        fprintf(f, ", \"out\": ");
        stk_json_write_string(f, c->out);
        fprintf(f, "}\n");
        free(order);
        return;
    }
    fprintf(f,
            "\n%" PRId64 " trials in %.1f s: %" PRId64 " completed, %" PRId64
            " stopped by %s, %" PRId64 " early-stopped, %" PRId64 " failed\n",
            n, seconds, counts[TRIAL_COMPLETED], counts[TRIAL_STOPPED],
            stk_sched_name(c->sched.kind), counts[TRIAL_EARLY_STOPPED], counts[TRIAL_ERROR]);
    fprintf(f, "rank  trial  %-14s %-10s epochs  status         params\n",
            stk_monitor_name(c->metric), "at epoch");
    for (int64_t r = 0; r < n && r < 10; r++) {
        const tune_trial *t = &trials[order[r]];
        char st[32], v[32] = "-";
        tune_status_text(t, st);
        if (!isnan(t->best_value)) snprintf(v, sizeof v, "%.4f", t->best_value);
        fprintf(f, "%4" PRId64 "  %04" PRId64 "   %-14s %-10" PRId64 " %-7" PRId64 " %-14s", r + 1,
                t->id, v, t->best_epoch, t->epochs_run, st);
        for (int k = 0; k < t->params.n; k++)
            fprintf(f, " %s=%s", t->params.key[k], t->params.value[k]);
        fputc('\n', f);
    }
    if (n > 10) fprintf(f, "(%" PRId64 " more in %s/trials.csv)\n", n - 10, c->out);
    if (b && !isnan(b->best_value))
        fprintf(f,
                "best: trial %04" PRId64
                " (%s/best.json, best.safetensors); reproduce it with\n  %s\n",
                b->id, c->out, b->command);
    free(order);
}
