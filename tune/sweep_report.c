/* What a sweep writes (tune_sweep.h): trials.csv, best.json,
 * best.safetensors, each trial's params.json, and the ranked summary. */
#include "tune/sweep.h"

#include "common/fs.h"
#include "common/json.h"
#include "common/text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void stk_tune_status_text(const stk_tune_trial *t, char buf[32])
{
    static const char *const names[] = {"PENDING", "COMPLETED", "STOPPED", "EARLY_STOPPED",
                                        "ERROR"};
    if (t->status == STK_TRIAL_STOPPED)
        snprintf(buf, 32, "STOPPED@%" PRId64, t->stopped_at);
    else
        snprintf(buf, 32, "%s", names[t->status]);
}

stk_status stk_tune_write_text(const char *path, void (*fill)(FILE *, const void *),
                               const void *ctx)
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
static void params_object(FILE *f, const stk_tune_trial *t)
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

stk_status stk_tune_write_params(const stk_tune_trial *t)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/params.json", t->out);
    return stk_tune_write_text(path, params_json, t);
}

typedef struct results {
    const stk_tune_config *c;
    const stk_tune_trial *trials;
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
        const stk_tune_trial *t = &r->trials[i];
        char st[32], v[32];
        stk_tune_status_text(t, st);
        fprintf(f, "%04" PRId64 ",%s", t->id, st);
        for (int k = 0; k < t->params.n; k++) {
            fputc(',', f);
            stk_csv_write_field(f, t->params.value[k]);
        }
        stk_number_text(t->best_value, v);
        fprintf(f, ",%s,%" PRId64 ",%" PRId64 ",%.1f,", isnan(t->best_value) ? "" : v,
                t->best_epoch, t->epochs_run, t->seconds);
        stk_csv_write_field(f, t->error);
        fputc(',', f);
        /* a PBT trial that cloned another has no single command: its pbt.csv */
        stk_csv_write_field(f, t->command && !t->cloned ? t->command : "");
        fputc('\n', f);
    }
}

const stk_tune_trial *stk_tune_best(const stk_tune_config *c, const stk_tune_trial *trials,
                                    int64_t n)
{
    const stk_tune_trial *b = NULL;
    for (int64_t i = 0; i < n; i++) {
        const stk_tune_trial *t = &trials[i];
        if (isnan(t->best_value)) continue;
        if (!b || (c->maximise ? t->best_value > b->best_value : t->best_value < b->best_value))
            b = t;
    }
    return b;
}

static void best_json(FILE *f, const void *ctx)
{
    const results *r = ctx;
    const stk_tune_trial *b = stk_tune_best(r->c, r->trials, r->n);
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
    stk_json_write_string(f, b->cloned ? "" : b->command);
    fputs("}\n", f);
}

/* best.safetensors: a copy of the best trial's best.safetensors (the
 * weights of its best epoch by its --monitor, as `stoke train` keeps). */
static stk_status copy_best(const stk_tune_config *c, const stk_tune_trial *b)
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

stk_status stk_tune_write_trials(const stk_tune_config *c, const stk_tune_trial *trials, int64_t n)
{
    results r = {c, trials, n};
    char path[1100];
    snprintf(path, sizeof path, "%s/trials.csv", c->out);
    return stk_tune_write_text(path, trials_csv, &r);
}

/* One CSV line's fields (quoted ones unquoted), in place; their number. */
static int csv_split(char *line, char **fields, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max) return n;
        if (*p == '"') {
            char *o = ++p;
            fields[n++] = o;
            while (*p && !(*p == '"' && p[1] != '"')) {
                if (*p == '"') p++;
                *o++ = *p++;
            }
            if (*p) p++;
            *o = '\0';
            if (*p != ',') return n;
            p++;
            continue;
        }
        fields[n++] = p;
        char *end = p + strcspn(p, ",\n\r");
        char sep = *end;
        *end = '\0';
        if (sep != ',') return n;
        p = end + 1;
    }
}

stk_status stk_tune_read_trials(const stk_tune_config *c, stk_tune_trial *trials, int64_t n)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/trials.csv", c->out);
    uint8_t *data;
    size_t len;
    stk_status st = stk_file_read_all(path, 1ull << 30, &data, &len);
    if (st == STK_ERR_IO && access(path, F_OK) != 0) return STK_OK; /* killed before the first */
    if (st != STK_OK) return st;
    char *text = realloc(data, len + 1);
    if (!text) {
        free(data);
        return stk_error(STK_ERR_NOMEM, "out of memory");
    }
    text[len] = '\0';
    int k = c->space.n, line = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (line++ == 0) continue; /* the header */
        char *f[STK_SPACE_MAX_KEYS + 10];
        int nf = csv_split(l, f, STK_SPACE_MAX_KEYS + 10);
        char *end;
        int64_t id = nf == k + 8 ? strtoll(f[0], &end, 10) : -1;
        if (id < 0 || id >= n || *end) {
            st = stk_error(STK_ERR_FORMAT, "%s line %d: not a trial of this sweep", path, line);
            break;
        }
        stk_tune_trial *t = &trials[id];
        const char *status = f[1];
        if (!strncmp(status, "STOPPED@", 8)) {
            t->status = STK_TRIAL_STOPPED;
            t->stopped_at = strtoll(status + 8, NULL, 10);
        } else if (!strcmp(status, "COMPLETED")) {
            t->status = STK_TRIAL_COMPLETED;
        } else if (!strcmp(status, "EARLY_STOPPED")) {
            t->status = STK_TRIAL_EARLY_STOPPED;
        } else if (!strcmp(status, "ERROR")) {
            t->status = STK_TRIAL_ERROR;
        } else {
            continue; /* PENDING: it runs again */
        }
        t->announced = true;
        t->best_value = *f[k + 2] ? strtod(f[k + 2], NULL) : NAN;
        t->best_epoch = strtoll(f[k + 3], NULL, 10);
        t->epochs_run = strtoll(f[k + 4], NULL, 10);
        t->seconds = strtod(f[k + 5], NULL);
        snprintf(t->error, sizeof t->error, "%s", f[k + 6]);
    }
    free(text);
    return st;
}

stk_status stk_tune_write_results(const stk_tune_config *c, const stk_tune_trial *trials, int64_t n)
{
    results r = {c, trials, n};
    char path[1100];
    STK_TRY(stk_tune_write_trials(c, trials, n));
    const stk_tune_trial *b = stk_tune_best(c, trials, n);
    if (!b) return STK_OK;
    snprintf(path, sizeof path, "%s/best.json", c->out);
    STK_TRY(stk_tune_write_text(path, best_json, &r));
    return copy_best(c, b);
}

static int by_metric_desc = 1;
static const stk_tune_trial *sort_base;

static int rank_cmp(const void *a, const void *b)
{
    const stk_tune_trial *x = &sort_base[*(const int64_t *)a], *y = &sort_base[*(const int64_t *)b];
    bool nx = isnan(x->best_value), ny = isnan(y->best_value);
    if (nx != ny) return nx ? 1 : -1;
    if (!nx && x->best_value != y->best_value)
        return (x->best_value < y->best_value) == (by_metric_desc > 0) ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void stk_tune_print_summary(const stk_tune_config *c, const stk_tune_trial *trials, int64_t n,
                            FILE *f, bool json, double seconds)
{
    int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order) return;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    sort_base = trials;
    by_metric_desc = c->maximise ? 1 : -1;
    qsort(order, (size_t)n, sizeof *order, rank_cmp);
    const stk_tune_trial *b = n ? &trials[order[0]] : NULL;
    int64_t counts[5] = {0};
    for (int64_t i = 0; i < n; i++) counts[trials[i].status]++;
    if (json) {
        char num[STK_JSON_NUMBER];
        fprintf(f,
                "{\"trials\": %" PRId64 ", \"completed\": %" PRId64 ", \"stopped\": %" PRId64
                ", \"early_stopped\": %" PRId64 ", \"errors\": %" PRId64 ", \"seconds\": %.1f",
                n, counts[STK_TRIAL_COMPLETED], counts[STK_TRIAL_STOPPED],
                counts[STK_TRIAL_EARLY_STOPPED], counts[STK_TRIAL_ERROR], seconds);
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
            n, seconds, counts[STK_TRIAL_COMPLETED], counts[STK_TRIAL_STOPPED],
            stk_sched_name(c->sched.kind), counts[STK_TRIAL_EARLY_STOPPED],
            counts[STK_TRIAL_ERROR]);
    fprintf(f, "rank  trial  %-14s %-10s epochs  status         params\n",
            stk_monitor_name(c->metric), "at epoch");
    for (int64_t r = 0; r < n && r < 10; r++) {
        const stk_tune_trial *t = &trials[order[r]];
        char st[32], v[32] = "-";
        stk_tune_status_text(t, st);
        if (!isnan(t->best_value)) snprintf(v, sizeof v, "%.4f", t->best_value);
        fprintf(f, "%4" PRId64 "  %04" PRId64 "   %-14s %-10" PRId64 " %-7" PRId64 " %-14s", r + 1,
                t->id, v, t->best_epoch, t->epochs_run, st);
        for (int k = 0; k < t->params.n; k++)
            fprintf(f, " %s=%s", t->params.key[k], t->params.value[k]);
        fputc('\n', f);
    }
    if (n > 10) fprintf(f, "(%" PRId64 " more in %s/trials.csv)\n", n - 10, c->out);
    if (b && !isnan(b->best_value) && b->cloned)
        fprintf(f,
                "best: trial %04" PRId64 " (%s/best.json, best.safetensors); its values changed "
                "as it ran: %s/pbt.csv\n",
                b->id, c->out, b->out);
    else if (b && !isnan(b->best_value))
        fprintf(f,
                "best: trial %04" PRId64
                " (%s/best.json, best.safetensors); reproduce it with\n  %s\n",
                b->id, c->out, b->command);
    free(order);
}
