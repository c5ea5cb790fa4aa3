/* Population based training's exploit and explore steps for `stoke tune`
 * (tune_sweep.h): a trial's state kept for others to clone, and cloned. */
#include "tune/sweep.h"

#include "common/crc32c.h"
#include "common/rng.h"

#include <errno.h>
#include <stdarg.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool stk_tune_pbt_key(const char *key)
{
    return !strcmp(key, "lr") || !strcmp(key, "momentum") || !strcmp(key, "wd") ||
           !strcmp(key, "label-smoothing");
}

/* FNV-1a over a tensor's bytes (NULL: nothing). */
static stk_status hash_tensor(stk_tensor *x, uint64_t *h)
{
    if (!x) return STK_OK;
    size_t bytes = (size_t)stk_tensor_numel(x) * stk_dtype_size(stk_tensor_dtype(x));
    void *host = malloc(bytes ? bytes : 1);
    if (!host) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = stk_tensor_to_host(x, host, bytes);
    if (st == STK_OK) *h = stk_fnv1a64(*h, host, bytes);
    free(host);
    return st;
}

/* The state a clone copies: every parameter and buffer, every optimizer state. */
static stk_status state_hash(stk_trainer *tr, uint64_t *out)
{
    uint64_t h = 0xcbf29ce484222325ull;
    stk_model *m = stk_trainer_model(tr);
    for (int i = 0; i < stk_model_param_count(m); i++)
        STK_TRY(hash_tensor(stk_model_param(m, i)->value, &h));
    stk_optim *o = stk_trainer_optim(tr);
    for (int i = 0; o && i < stk_optim_state_count(o); i++)
        STK_TRY(hash_tensor(stk_optim_state_tensor(o, i), &h));
    *out = h;
    return STK_OK;
}

static stk_status log_line(const stk_tune_trial *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A line appended to the trial's pbt.csv, unless it holds it already (a
 * resumed sweep doing a round's part again). */
static stk_status log_line(const stk_tune_trial *t, const char *fmt, ...)
{
    char path[1100], line[1024], have[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    snprintf(path, sizeof path, "%s/pbt.csv", t->out);
    FILE *f = fopen(path, "r");
    bool fresh = !f;
    while (f && fgets(have, sizeof have, f))
        if (!strcmp(have, line)) {
            fclose(f);
            return STK_OK;
        }
    if (f) fclose(f);
    if (!(f = fopen(path, "a"))) return stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));
    if (fresh) fputs("epoch,event,trial,trial_epoch,state_fnv,values\n", f);
    fputs(line, f);
    if (fclose(f) != 0) return stk_error(STK_ERR_IO, "%s: %s", path, strerror(errno));
    return STK_OK;
}

static void values_text(const stk_tune_trial *t, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int k = 0; k < t->params.n; k++) {
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s=%s", k ? " " : "", t->params.key[k],
                 t->params.value[k]);
    }
}

stk_status stk_tune_pbt_save(const stk_tune_config *c, stk_tune_trial *t, stk_trainer *tr,
                             int64_t epoch)
{
    (void)c;
    char path[1100], values[600];
    snprintf(path, sizeof path, "%s/pbt.safetensors", t->out);
    stk_status st = stk_trainer_save(tr, path, 0, NULL, NULL);
    if (st != STK_OK) {
        unlink(path); /* no clone takes an older state for this round's */
        return st;
    }
    STK_TRY(state_hash(tr, &t->saved_hash));
    t->saved_epoch = epoch;
    values_text(t, values, sizeof values);
    return log_line(t, "%" PRId64 ",saved,%04" PRId64 ",%" PRId64 ",%016" PRIx64 ",%s\n", epoch,
                    t->id, epoch, t->saved_hash, values);
}

stk_status stk_tune_pbt_set_values(stk_trainer *tr, const stk_trial_params *p)
{
    for (int k = 0; k < p->n; k++) {
        float v = strtof(p->value[k], NULL);
        const char *key = p->key[k];
        stk_status st = STK_OK;
        if (!strcmp(key, "lr"))
            st = stk_trainer_set_base_lr(tr, v);
        else if (!strcmp(key, "momentum"))
            st = stk_optim_set_momentum(stk_trainer_optim(tr), v);
        else if (!strcmp(key, "wd"))
            st = stk_optim_set_weight_decay(stk_trainer_optim(tr), v);
        else if (!strcmp(key, "label-smoothing"))
            st = stk_trainer_set_label_smoothing(tr, v);
        if (st != STK_OK) return stk_error_prefix(st, "PBT's explore: %s=%s: ", key, p->value[k]);
    }
    return STK_OK;
}

static void explore(const stk_tune_config *c, stk_tune_trial *t, const stk_tune_trial *src)
{
    stk_trial_params p;
    stk_space_explore(&c->space, c->explore, c->resample_probability, &src->params, &p);
    /* A value PBT takes out of its stoke train flag's range (momentum 0.99 *
     * 1.2, label smoothing 0.9 * 1.2) is clamped into it, as the flag's own
     * parser would accept it. */
    for (int k = 0; k < p.n; k++) {
        const stk_flag *f = stk_run_setting_find(p.key[k]);
        double v = strtod(p.value[k], NULL);
        if (!f || f->kind != STK_FLAG_KIND_NUMBER || (v >= f->min && v <= f->max)) continue;
        stk_number_text(v < f->min ? f->min : f->max, p.value[k]);
    }
    t->params = p;
    t->cloned = true;
}

void stk_tune_pbt_plan(const stk_tune_config *c, stk_tune_trial *trials, const stk_pbt_step *steps,
                       int64_t n, int64_t epoch)
{
    for (int64_t i = 0; i < n; i++) {
        stk_tune_trial *t = &trials[steps[i].trial];
        if (steps[i].save) t->saved_epoch = epoch;
        if (steps[i].clone >= 0) explore(c, t, &trials[steps[i].clone]);
    }
}

stk_status stk_tune_pbt_load(const stk_tune_config *c, stk_tune_trial *t, stk_trainer *tr,
                             const stk_tune_trial *src, int64_t epoch)
{
    (void)c;
    char path[1100], values[600];
    snprintf(path, sizeof path, "%s/pbt.safetensors", src->out);
    STK_TRY(stk_trainer_resume(tr, path)); /* checked whole before anything changes */
    uint64_t h;
    STK_TRY(state_hash(tr, &h));
    STK_TRY(stk_tune_pbt_set_values(tr, &t->params));
    values_text(t, values, sizeof values);
    return log_line(t, "%" PRId64 ",cloned,%04" PRId64 ",%" PRId64 ",%016" PRIx64 ",%s\n", epoch,
                    src->id, src->saved_epoch, h, values);
}
